"""The evaluation runner on the demo data: the report's numbers recomputed
independently from the per-question JSONL, and a run stopped mid-way then
resumed giving the same report as an uninterrupted one."""

import json
import re
import shutil

import numpy as np
import pytest

from racer_jax.eval import agents_eval, passes

QUIET = dict(progress=False, log=lambda _: None)
TIMING = ("latency_p50_s", "latency_p95_s", "wall_s", "peak_rss_gb",
          "resumed_batches", "torn_lines_redone")


def _copy_run(head_run, tmp_path, name):
  config, workdir = head_run
  dst = tmp_path / name
  shutil.copytree(workdir, dst, ignore=shutil.ignore_patterns("eval"))
  return config, dst


def _evaluate(config, workdir, **kw):
  return agents_eval.evaluate(config, None, workdir, seeds=2,
                              ablations=("no_memory", "single_path"), **kw,
                              **QUIET)


def _recompute_accuracy(path):
  rows = [json.loads(x) for x in path.read_text().splitlines()]
  return np.mean([r["prediction"] == r["gold"] for r in rows]), rows


def _path_hit(row):
  paths = row["rounds"][row["deciding_turn"]]["paths"][row["gold"]]
  return any(p["reached"] for p in paths)


def _strip(figures):
  """The figures without timings and the folder they were written to."""
  out = {k: v for k, v in figures.items()
         if not k.startswith(TIMING) and k != "out_dir"}
  out["ablations"] = {n: {k: v for k, v in row.items()
                          if not k.startswith(TIMING)}
                      for n, row in figures["ablations"].items()}
  return out


@pytest.mark.slow  # ~1-2 min: 8 passes of the loop
def test_report_matches_jsonl_and_resume_is_exact(head_run, tmp_path,
                                                  monkeypatch):
  config, whole = _copy_run(head_run, tmp_path, "whole")
  figures = _evaluate(config, whole)
  out = whole / "eval" / "dev"
  for key in ("accuracy", "accuracy_std", "seeds", "latency_p50_s",
              "latency_p95_s", "peak_rss_gb"):
    assert key in figures, key
  assert figures["seeds"] == 2
  accs, hits = [], []
  for s in range(2):
    acc, rows = _recompute_accuracy(out / f"full.seed{s}.jsonl")
    assert sorted(r["index"] for r in rows) == list(range(len(rows)))
    accs.append(acc)
    hits.append(np.mean([_path_hit(r) for r in rows]))
  assert figures["accuracy"] == pytest.approx(np.mean(accs))
  assert figures["accuracy_std"] == pytest.approx(np.std(accs))
  assert figures["path_hit_rate"] == pytest.approx(np.mean(hits))
  for name in ("no_critic", "no_memory", "single_path"):
    acc = np.mean([_recompute_accuracy(out / f"{name}.seed{s}.jsonl")[0]
                   for s in range(2)])
    row = figures["ablations"][name]
    assert row["accuracy"] == pytest.approx(acc)
    assert row["delta_accuracy"] == pytest.approx(acc - figures["accuracy"])
  single = [json.loads(x) for x in
            (out / "single_path.seed0.jsonl").read_text().splitlines()]
  assert all(len(ps) <= 1 for r in single for rd in r["rounds"]
             for ps in rd["paths"])
  report = (out / "report.md").read_text()
  shown = re.search(r"\| accuracy \| ([0-9.]+) ± ([0-9.]+) \|", report)
  assert float(shown.group(1)) == pytest.approx(figures["accuracy"],
                                                abs=5e-4)
  for picture in ("training_curves.png", "ablations.png",
                  "reasoning_paths.png"):
    assert (out / picture).stat().st_size > 1000, picture
  assert json.loads((out / "metrics.json").read_text()) == figures

  # The same evaluation killed in the middle of seed 1's full pass (after
  # one batch, with a torn half line behind it), then resumed.
  config, stopped = _copy_run(head_run, tmp_path, "stopped")
  real = passes.run_pass
  calls = []

  def crashing(collab, split_data, **kw):
    calls.append(kw["path"].name)
    if kw["path"].name == "full.seed1.jsonl":
      real(collab, split_data, **dict(kw, stop_after_batches=1))
      with open(kw["path"], "a") as f:
        f.write('{"index": 99, "tor')
      raise KeyboardInterrupt("killed")
    return real(collab, split_data, **kw)
  monkeypatch.setattr(passes, "run_pass", crashing)
  with pytest.raises(KeyboardInterrupt):
    _evaluate(config, stopped)
  monkeypatch.setattr(passes, "run_pass", real)
  resumed = _evaluate(config, stopped, resume=True)
  assert resumed["resumed_batches"] >= 3 * 2 + 1  # seed 0 + 1 batch
  assert resumed["torn_lines_redone"] == 1
  assert _strip(resumed) == _strip(figures)
  for s in range(2):
    a = [{k: v for k, v in json.loads(x).items() if k != "seconds"}
         for x in (out / f"full.seed{s}.jsonl").read_text().splitlines()]
    b = [{k: v for k, v in json.loads(x).items() if k != "seconds"}
         for x in (stopped / "eval" / "dev" /
                   f"full.seed{s}.jsonl").read_text().splitlines()]
    assert a == b


SENTINEL = "sentinel-evaluation-key-9876543210"


@pytest.mark.slow  # ~1 min each: two passes with an LLM backend (a stub)
@pytest.mark.parametrize("backend", ["gemini", "openai"])
def test_api_key_is_never_written(head_run, tmp_path, monkeypatch, capfd,
                                  backend):
  """An evaluation with an LLM backend against a local stub, with faults;
  the key is in the environment and must appear in no file the run writes
  (JSONL, metrics, report, cache, checkpoints), no log and no exception."""
  from tests.llm import stub_gemini, stub_openai
  reply = json.dumps({"answer": 0, "confidence": 0.9, "rationale": "r",
                      "verdict": "ACCEPT", "reason": "ok"})
  config, workdir = _copy_run(head_run, tmp_path, backend)
  if backend == "gemini":
    monkeypatch.setenv("GEMINI_API_KEY", SENTINEL)
    stub = stub_gemini.StubGemini(lambda req: reply)
    faults = [(500, stub_gemini.error_body(500, "INTERNAL"), 0),
              (200, b"not json", 0)]
    header, expected = "x-goog-api-key", SENTINEL
  else:
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    stub = stub_openai.StubOpenAI(lambda req: reply, models=["m-test"])
    faults = [(500, stub_openai.error(500, "x", "server_error"), 0),
              (200, b"not json", 0)]
    header, expected = "authorization", f"Bearer {SENTINEL}"
  with stub:
    stub.script.extend(faults)
    agents = config.agents.copy_and_resolve_references()
    agents.backend, agents.base_url = backend, stub.url
    agents.attempts, agents.model = 2, "m-test"
    figures = agents_eval.evaluate(config, None, workdir, seeds=1,
                                   agents=agents, progress=False)
    assert stub.requests and all(r["headers"].get(header) == expected
                                 for r in stub.requests)
  assert figures["llm"]["llm_calls"] > 0
  assert figures["llm_calls_per_question"] > 0
  assert (figures["backend"], figures["model"]) == (backend, "m-test")
  rows = [json.loads(x) for x in (workdir / "eval" / f"dev.{backend}-m-test"
                                  / "full.seed0.jsonl").read_text(
                                      ).splitlines()]
  assert sum(r["llm_calls"] for r in rows) / len(rows) == pytest.approx(
      figures["llm_calls_per_question"])
  assert all(r["llm"]["backend"] == backend for r in rows)
  for path in workdir.rglob("*"):
    if path.is_file():
      assert SENTINEL.encode() not in path.read_bytes(), path
  out, err = capfd.readouterr()
  assert SENTINEL not in out and SENTINEL not in err


@pytest.mark.slow  # ~30 s: two passes over six questions
def test_eval_file_is_evaluated_like_a_split(head_run, tmp_path):
  from racer_jax.data.datasets import DEMO_DIR
  config, workdir = _copy_run(head_run, tmp_path, "file")
  path = tmp_path / "mine.jsonl"
  lines = (DEMO_DIR / "dev.jsonl").read_text().splitlines()[:6]
  path.write_text("\n".join(lines) + "\n")
  figures = agents_eval.evaluate(config, None, workdir, eval_file=str(path),
                                 seeds=1, **QUIET)
  assert figures["name"].startswith("file_mine_") and figures["questions"] == 6
  assert figures["eval_file"] == str(path.resolve())
  out = workdir / "eval" / figures["name"]
  rows = (out / "full.seed0.jsonl").read_text().splitlines()
  assert [json.loads(x)["id"] for x in rows] == [
      json.loads(x)["id"] for x in lines]
  assert (out / "report.md").exists()


class NoPaths:
  """An ablation's GraphAgent a user might add: the full system's walker,
  its paths withheld (the agents answer from the question alone)."""

  def __init__(self, graph):
    self.graph = graph
    self.use_memory, self.memory_source = False, "none"
    self.temperature, self.keep = graph.temperature, graph.keep

  def reset_memory(self):
    pass

  def record(self, paths, outcome) -> int:
    return 0

  def retrieve(self, batch, rng, temperature=None, examples=None):
    out, per_row = self.graph.retrieve(batch, rng, temperature, examples)
    return out, [None if r is None else [[] for _ in r] for r in per_row]


@pytest.mark.slow  # 3 passes of the loop
def test_an_ablation_and_a_figure_declared_in_a_test_file(head_run, tmp_path,
                                                         monkeypatch):
  from racer_jax.eval import qa_metrics
  from racer_jax.runs import registry
  config, workdir = _copy_run(head_run, tmp_path, "ablated")
  registry.ABLATIONS.register("no_paths", registry.Ablation(
      "the walker's paths withheld",
      lambda stack, run, log: NoPaths(stack.graph)))
  monkeypatch.setitem(qa_metrics.FIGURES, "first_choice_rate",
                      qa_metrics.Figure(lambda rs: qa_metrics.mean_of(
                          r["prediction"] == 0 for r in rs), "headline"))
  try:
    figures = agents_eval.evaluate(config, None, workdir, seeds=1,
                                   ablations=("no_paths",), **QUIET)
  finally:
    registry.ABLATIONS.unregister("no_paths")
  out = workdir / "eval" / "dev"
  row = figures["ablations"]["no_paths"]
  assert row["description"] == "the walker's paths withheld"
  acc, rows = _recompute_accuracy(out / "no_paths.seed0.jsonl")
  assert row["accuracy"] == pytest.approx(acc)
  assert rows and all(not ps for r in rows for rd in r["rounds"]
                      for ps in rd["paths"])
  # the figure: in metrics.json (mean, std), per ablation, in the report
  _, full = _recompute_accuracy(out / "full.seed0.jsonl")
  first = np.mean([r["prediction"] == 0 for r in full])
  saved = json.loads((out / "metrics.json").read_text())
  assert saved["first_choice_rate"] == pytest.approx(first)
  assert saved["first_choice_rate_std"] == 0.0
  assert row["first_choice_rate"] == pytest.approx(
      np.mean([r["prediction"] == 0 for r in rows]))
  assert f"| first_choice_rate | {first:.3f}" in (out / "report.md"
                                                   ).read_text()
