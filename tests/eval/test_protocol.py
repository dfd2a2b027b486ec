"""The evaluation protocol on the demo answer run: no label of an evaluated
question shapes any answer. The memory's success/failure counts stay as
training left them, the critic's thresholds come from the validation slice
(so shuffling the evaluated labels changes neither them nor any answer),
a run without a validation slice is refused with the field named, and the
memory pass over the training split counts only training questions."""

import json
import shutil

import jax
import ml_collections
import numpy as np
import pytest

from racer_jax.agents import stack as stack_lib
from racer_jax.agents.graph_agent import GraphAgent
from racer_jax.data import datasets, validation
from racer_jax.errors import ConfigError
from racer_jax.eval import agents_eval, calibration, report
from racer_jax.runs import run_config
from tests.trained_runs import QUIET


def copy_run(answer_run, tmp_path, name="run"):
  """A private copy of the demo answer run (without its evaluations)."""
  config, trained = answer_run
  workdir = tmp_path / name
  shutil.copytree(trained, workdir, ignore=shutil.ignore_patterns("eval"))
  return config, workdir


def dev_file(tmp_path, name, shuffle_seed=None):
  """The demo dev split as a jsonl file; with ``shuffle_seed`` every
  question's answerKey is replaced by a random other label."""
  rows = [json.loads(x) for x in
          (datasets.DEMO_DIR / "dev.jsonl").read_text().splitlines()]
  if shuffle_seed is not None:
    rng = np.random.default_rng(shuffle_seed)
    for r in rows:
      labels = [c["label"] for c in r["question"]["choices"]]
      others = [x for x in labels if x != r["answerKey"]]
      r["answerKey"] = str(rng.choice(others))
  path = tmp_path / f"{name}.jsonl"
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  return path


def walker_memory(retrieval_runs, demo_workspace):
  _, _, refiner_dir = retrieval_runs
  agent = GraphAgent(refiner_dir, demo_workspace, log=lambda _: None)
  return jax.device_get(agent.memory)


def pass_memories(out_dir):
  """Per pass file: the memory counts its state recorded after the last
  batch."""
  out = {}
  for path in sorted(out_dir.glob("*.jsonl.state.npz")):
    with np.load(path) as st:
      out[path.name] = {k: st[k] for k in ("success", "failure",
                                             "rejection")}
  return out


def predictions(out_dir, name="full.seed0.jsonl"):
  rows = [json.loads(x) for x in (out_dir / name).read_text().splitlines()]
  return {r["id"]: (r["prediction"], r["accepted"],
                    [rd["answer"] for rd in r["rounds"]]) for r in rows}


def test_shuffled_labels_change_no_answer_on_four_questions(answer_run,
                                                            tmp_path):
  """The README's central claim guarded in the default suite (the whole
  check, below, is in the slow one): four dev questions evaluated with
  their labels and with shuffled labels get the same thresholds and the
  same answers, and no label reaches the memory."""
  config, workdir = copy_run(answer_run, tmp_path)
  runs = {name: agents_eval.evaluate(
      config, None, workdir, eval_file=str(dev_file(tmp_path, name, seed)),
      seeds=1, max_questions=4, **QUIET)
          for name, seed in (("true", None), ("shuffled", 1))}
  for figures in runs.values():
    assert figures["critic_calibration"] == "validation"
    assert figures["memory_eval_label_updates"] == 0
  assert runs["true"]["critic_thresholds"] == runs["shuffled"][
      "critic_thresholds"]
  a, b = (workdir / "eval" / runs[n]["name"] for n in ("true", "shuffled"))
  assert len(predictions(a)) == 4 and predictions(a) == predictions(b)


@pytest.mark.slow  # two evaluations of the dev file (24 s)
def test_evaluated_labels_shape_no_answer(answer_run, retrieval_runs,
                                          demo_workspace, tmp_path):
  config, workdir = copy_run(answer_run, tmp_path)
  trained = walker_memory(retrieval_runs, demo_workspace)
  runs = {}
  for name, seed in (("true", None), ("shuffled", 1)):
    runs[name] = agents_eval.evaluate(
        config, None, workdir, eval_file=str(dev_file(tmp_path, name, seed)),
        seeds=1, **QUIET)
  true, shuffled = runs["true"], runs["shuffled"]
  for figures in (true, shuffled):
    assert figures["critic_calibration"] == "validation"
    assert figures["memory_source"] == "walker_training"
    assert figures["memory_eval_label_updates"] == 0
    assert figures["protocol_warnings"] == []
  # The thresholds and every answer are the same whatever the labels are.
  assert true["critic_thresholds"] == shuffled["critic_thresholds"]
  a, b = (workdir / "eval" / runs[n]["name"] for n in ("true", "shuffled"))
  assert predictions(a) == predictions(b)
  assert predictions(a, "no_critic.seed0.jsonl") == predictions(
      b, "no_critic.seed0.jsonl")
  # The memory's success/failure counts are exactly what training left;
  # only the critic's label-free rejections were added.
  memories = pass_memories(a)
  assert set(memories) == {"full.seed0.jsonl.state.npz",
                           "no_critic.seed0.jsonl.state.npz"}
  for counts in memories.values():
    np.testing.assert_array_equal(counts["success"], trained.success)
    np.testing.assert_array_equal(counts["failure"], trained.failure)
    assert np.all(counts["rejection"] >= trained.rejection)
  assert (memories["full.seed0.jsonl.state.npz"]["rejection"].sum() >
          trained.rejection.sum()) == (true["accepted_fraction"] < 1)
  report = (a / "report.md").read_text().splitlines()
  assert report[0].startswith("# Evaluation") and "validation slice" in (
      "\n".join(report))

  # The online-learning switch does change the counts, and says so first.
  agents = ml_collections.ConfigDict(config.agents.to_dict())
  agents.learn_from_eval_labels = True
  online = agents_eval.evaluate(
      config, None, workdir, eval_file=str(dev_file(tmp_path, "true")),
      seeds=1, agents=agents, **QUIET)
  assert online["memory_eval_label_updates"] > 0
  assert online["learn_from_eval_labels"] is True
  folder = workdir / "eval" / online["name"]
  assert online["name"] == true["name"] + ".online_labels"
  counts = pass_memories(folder)["full.seed0.jsonl.state.npz"]
  assert (counts["success"] + counts["failure"]).sum() == (
      trained.success + trained.failure).sum() + sum(
          r["memory_label_updates"] for r in map(json.loads, (
              folder / "full.seed0.jsonl").read_text().splitlines()))
  first = (folder / "report.md").read_text().splitlines()[0]
  assert first.startswith("**Not a held-out evaluation:**")
  assert "learn_from_eval_labels" in first


def test_a_run_without_validation_slice_is_refused(answer_run, tmp_path):
  config, workdir = copy_run(answer_run, tmp_path)
  saved = json.loads((workdir / "config.json").read_text())
  del saved["answer"]["validation_fraction"]  # as saved before the change
  (workdir / "config.json").write_text(json.dumps(saved))
  legacy = run_config.load(workdir)
  with pytest.raises(ConfigError, match=r"answer\.validation_fraction.*"
                     "legacy_critic_calibration"):
    agents_eval.evaluate(legacy, None, workdir, seeds=1, **QUIET)


@pytest.mark.slow  # two more passes of the loop
def test_legacy_calibration_is_said_in_the_first_line(answer_run, tmp_path):
  config, workdir = copy_run(answer_run, tmp_path)
  saved = json.loads((workdir / "config.json").read_text())
  del saved["answer"]["validation_fraction"]
  (workdir / "config.json").write_text(json.dumps(saved))
  figures = agents_eval.evaluate(run_config.load(workdir), None,
                                 workdir, seeds=1,
                                 legacy_critic_calibration=True, **QUIET)
  assert figures["critic_calibration"] == "twofold_eval_split"
  assert set(figures["critic_thresholds"]) == {"even", "odd"}
  first = (workdir / "eval" / "dev.legacy_critic" / "report.md").read_text(
  ).splitlines()[0]
  assert first.startswith("**Not a held-out evaluation:**")
  assert "two-fold" in first


@pytest.mark.slow  # a loop pass over the train split, then an evaluation (30 s)
def test_memory_pass_counts_only_training_questions(answer_run,
                                                    retrieval_runs,
                                                    demo_workspace,
                                                    tmp_path):
  config, workdir = copy_run(answer_run, tmp_path)
  config = config.copy_and_resolve_references()
  config.agents.memory_from_train = True
  (workdir / "config.json").write_text(config.to_json())
  trained = walker_memory(retrieval_runs, demo_workspace)
  record = calibration.calibrate_after_training(config, None, workdir,
                                                **QUIET)
  assert record["identity"]["memory_source"] == "train_split_loop"
  rows = [json.loads(x) for x in (workdir / stack_lib.MEMORY_DIR /
                                  "train_pass.jsonl").read_text().splitlines()]
  examples = demo_workspace.splits["train"].examples
  train_rows, val_rows = validation.split_rows(config, len(examples))
  assert sorted(r["index"] for r in rows) == train_rows.tolist()
  assert not {r["id"] for r in rows} & (
      {examples[i].id for i in val_rows} |
      {e.id for e in demo_workspace.splits["dev"].examples})
  # The saved memory is the walker's plus exactly what these records say.
  memory, saved = stack_lib.load_train_memory(workdir,
                                              demo_workspace.kg.num_edges)
  memory = jax.device_get(memory)
  success, failure = trained.success.copy(), trained.failure.copy()
  for r in rows:
    target = success if r["correct"] else failure
    for path in r["evidence"]:
      np.add.at(target, [t["edge_id"] for t in path], 1.0)
  np.testing.assert_array_equal(memory.success, success)
  np.testing.assert_array_equal(memory.failure, failure)
  assert saved["label_updates"] == sum(r["memory_label_updates"]
                                       for r in rows) > 0
  assert saved["questions"] == len(train_rows)
  # An evaluation starts from it, and adds no label counts of its own.
  figures = agents_eval.evaluate(config, None, workdir, seeds=1, **QUIET)
  assert figures["memory_source"] == "train_split_loop"
  assert figures["memory_eval_label_updates"] == 0
  for counts in pass_memories(workdir / "eval" / "dev").values():
    np.testing.assert_array_equal(counts["success"], memory.success)
    np.testing.assert_array_equal(counts["failure"], memory.failure)


def test_unsure_rounds_without_memory_are_said():
  """The rejected rounds no memory could penalize are summed over seeds
  and said in the report's protocol line; none, nothing is said."""
  class NoMemory:
    memory_source = "none"

  records = [{"unsure_rounds": 2, "unsure_without_memory": 2},
             {"unsure_rounds": 1, "unsure_without_memory": 1}, {}]
  figures = agents_eval.protocol_figures({"full": [records, records[:1]]},
                                         {"critic_calibration": "validation",
                                          "figures": {"questions": 4}},
                                         NoMemory(), False)
  assert figures["unsure_rounds"] == 5
  assert figures["unsure_rounds_without_memory"] == 5
  assert "5 of 5 UNSURE rounds could not penalize" in (
      report.unsure_phrase(figures))
  assert report.unsure_phrase({"unsure_rounds": 3,
                               "unsure_rounds_without_memory": 0}) == ""


def test_k_prime_is_chosen_on_validation_and_used(answer_run, tmp_path):
  """RACER's k' "determined through validation": the answer stage chose
  the paths shown per choice by the loop's one-round accuracy on the
  validation slice (never on an evaluated question), recorded it in the
  run's config, and every stack and evaluation uses it."""
  from racer_jax.agents.stack import AgentStack
  from racer_jax.eval import paths_choice
  config, workdir = copy_run(answer_run, tmp_path)
  saved = run_config.load(workdir, "answer run")
  chosen = run_config.chosen(saved, "refiner_top_k_chosen")
  candidates = paths_choice.candidates_of(config)
  assert candidates == (1, 2, 3, 4) and chosen in candidates
  [record_file] = workdir.glob("calibration/*/paths_per_choice.json")
  record = json.loads(record_file.read_text())
  accuracy = {int(k): a for k, a in record["validation_accuracy"].items()}
  assert sorted(accuracy) == list(candidates)
  assert chosen == max(candidates, key=lambda k: (accuracy[k], -k))
  # the passes behind it ran on the validation slice only
  stack = AgentStack(saved, None, workdir, **QUIET)
  assert stack.keep == chosen and stack.keep_chosen == chosen
  held = {stack.validation().examples[int(i)].id
          for i in stack.validation().dataset.ids}
  for k in candidates:
    rows = [json.loads(x) for x in (record_file.parent /
            f"validation.k{k}.jsonl").read_text().splitlines()]
    assert {r["id"] for r in rows} == held
    assert all(len(p) <= k for r in rows for p in r["rounds"][0]["paths"])
    assert np.mean([r["correct"] for r in rows]) == pytest.approx(
        accuracy[k])
  dev_ids = {e.id for e in stack.split("dev").examples}
  assert not held & dev_ids
  # the critic was fitted on the chosen k''s pass itself: the same
  # computation, shared instead of run again
  [critic_pass] = workdir.glob("calibration/*/validation.jsonl")
  assert critic_pass.read_text() == (
      record_file.parent / f"validation.k{chosen}.jsonl").read_text()
  # a run told to choose among (1,) alone chooses again, records and uses 1
  with saved.unlocked():
    saved.answer.paths_per_choice_candidates = (1,)
  stack = AgentStack(saved, None, workdir, **QUIET)
  again = paths_choice.choose(stack, **QUIET)
  assert again["refiner_top_k_chosen"] == 1 and stack.keep == 1
  assert stack.graph.keep == 1
  assert run_config.chosen(run_config.load(workdir), "refiner_top_k_chosen"
                           ) == 1


def test_one_walk_per_batch_serves_every_k_prime(answer_run, tmp_path,
                                                 monkeypatch):
  """The k' passes differ only in the paths shown, so the walker runs once
  per batch for all of them; the records are those of walking per pass."""
  import contextlib
  from racer_jax.agents.stack import AgentStack
  from racer_jax.eval import paths_choice
  records, walks = {}, {}
  for name in ("reused", "walked"):
    _, workdir = copy_run(answer_run, tmp_path, name)
    for f in [*workdir.glob("calibration/*/validation.k*.jsonl"),
              *workdir.glob("calibration/*/paths_per_choice.json")]:
      f.unlink()
    stack = AgentStack(run_config.load(workdir, "answer run"), None,
                       workdir, **QUIET)
    if name == "walked":
      monkeypatch.setattr(stack.graph, "reusing_retrievals",
                          contextlib.nullcontext)
    before = stack.graph.device_retrievals
    paths_choice.choose(stack, **QUIET)
    walks[name] = stack.graph.device_retrievals - before
    records[name] = {
        f.name: [{k: v for k, v in json.loads(x).items() if k != "seconds"}
                 for x in f.read_text().splitlines()]
        for f in sorted(workdir.glob("calibration/*/validation.k*.jsonl"))}
  assert len(records["reused"]) == 4 and records["reused"] == records[
      "walked"]
  assert walks["reused"] > 0 and walks["walked"] == 4 * walks["reused"]
