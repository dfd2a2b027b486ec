"""``launch/evaluate.py`` on an answer run: the whole four-agent evaluation
on the demo data, its figures checked against the per-question file."""

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO


@pytest.mark.slow  # ~2-3 min: four passes of the loop in a subprocess
def test_agents_evaluation_cli(answer_run, demo_workspace):
  _, workdir = answer_run
  out = subprocess.run(
      [sys.executable, str(REPO / "launch/evaluate.py"),
       f"--workdir={workdir}", "--progress=false", "--seeds=1",
       "--ablations", "--ablation_names=no_refiner,no_memory"],
      capture_output=True, text=True, cwd=workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  for key in ("accuracy", "accuracy_answer_head_only",
              "llm_calls_per_question", "tokens_per_question",
              "triples_verified_fraction", "accuracy_no_critic",
              "accuracy_no_refiner", "accuracy_no_memory"):
    assert key in figures, key
  assert figures["triples_verified_fraction"] == 1.0
  # the held-out protocol: thresholds from the validation slice, no
  # evaluated label in the memory
  assert figures["critic_calibration"] == "validation"
  assert figures["memory_eval_label_updates"] == 0
  # the refiner's k' chosen on the validation slice, repeated here
  saved = json.loads((workdir / "config.json").read_text())
  assert figures["refiner_top_k_chosen"] == saved["chosen_on_validation"][
      "refiner_top_k_chosen"] == figures["paths_per_choice"]
  assert figures["llm_calls_per_question"] == 0  # local backend
  assert figures["tokens_per_question"] == 0
  gain = figures["knowledge_gain"]  # paired: head alone (a) vs full (b)
  assert gain["accuracy_a"] == pytest.approx(
      figures["accuracy_answer_head_only"])
  assert gain["accuracy_b"] == pytest.approx(figures["accuracy"])
  assert gain["difference_ci95"][0] <= gain["difference"] <= \
      gain["difference_ci95"][1]
  rows = [json.loads(x) for x in
          (workdir / "eval" / "dev" / "full.seed0.jsonl").read_text().splitlines()]
  examples = demo_workspace.splits["dev"].examples
  assert [r["id"] for r in rows] == [e.id for e in examples]
  labeled = [r for r in rows if r["gold"] is not None]
  assert figures["accuracy"] == np.mean([r["correct"] for r in labeled])
  assert figures["accepted_fraction"] == np.mean([r["accepted"]
                                                  for r in rows])
  assert all(1 <= len(r["rounds"]) <= 3 for r in rows)
  for r in rows:
    last = r["rounds"][r["deciding_turn"]]
    assert r["prediction"] == last["answer"] or not r["accepted"]


@pytest.mark.slow  # ~1-2 min: two passes of the loop and an answer-only pass
def test_answer_run_without_paths_in_the_loop(answer_run, retrieval_runs,
                                              tmp_path):
  """An answer run trained without paths enters the loop through
  --retrieval_workdir: the answerer keeps its own input (so its one-round
  accuracy is its answer-only accuracy), the paths back the critic."""
  import shutil
  _, _, refiner_dir = retrieval_runs
  _, trained = answer_run
  workdir = tmp_path / "no_paths"
  shutil.copytree(trained, workdir, ignore=shutil.ignore_patterns("eval"))
  config = json.loads((workdir / "config.json").read_text())
  config["answer"]["knowledge_workdir"] = ""  # as if trained without paths
  (workdir / "config.json").write_text(json.dumps(config))
  cli = [sys.executable, str(REPO / "launch/evaluate.py"),
         f"--workdir={workdir}", "--progress=false"]
  out = subprocess.run(cli, capture_output=True, text=True, cwd=workdir)
  assert out.returncode != 0 and "--retrieval_workdir" in out.stderr
  out = subprocess.run(cli + ["--answer_only"], capture_output=True,
                       text=True, cwd=workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  alone = json.loads(out.stdout.strip().splitlines()[-1])
  out = subprocess.run(cli + ["--seeds=1", f"--retrieval_workdir={refiner_dir}"],
                       capture_output=True, text=True, cwd=workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  assert figures["paths_shown_to_answerer"] is False
  assert figures["retrieval_workdir"] == str(refiner_dir)
  assert figures["accuracy_no_critic"] == pytest.approx(alone["accuracy"])
  assert figures["triples_verified_fraction"] == 1.0
  rows = [json.loads(x) for x in (workdir / "eval" / "dev" /
                                  "full.seed0.jsonl").read_text().splitlines()]
  assert any(p for r in rows for rd in r["rounds"] for p in rd["paths"])
  for r in rows:
    assert all(k == "" for rd in r["rounds"] for k in rd["knowledge"])
    # the same input every round; later rounds batch fewer questions, so
    # the matmuls may round differently in the last bits
    probs = [rd["probs"] for rd in r["rounds"]]
    for p in probs:
      np.testing.assert_allclose(p, probs[0], rtol=1e-5, atol=1e-7)
  # launch/answer.py takes the same option, and the critic this evaluation
  # fitted on the validation slice for this setup
  out = subprocess.run(
      [sys.executable, str(REPO / "launch/answer.py"), f"--workdir={workdir}",
       "--question=Where would you put ice cream to keep it cold?",
       "--choices=oven,freezer,table", "--format=json",
       f"--retrieval_workdir={refiner_dir}"],
      capture_output=True, text=True, cwd=workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  record = json.loads(out.stdout.strip().splitlines()[-1])
  assert record["critic"].startswith("validation slice") and str(
      workdir / "calibration") in record["critic"]
  assert all(k == "" for rd in record["rounds"] for k in rd["knowledge"])
