"""Awkward questions end to end (prepare, then the walker's evaluation):
each has a documented outcome in the run report, none crashes, none is
dropped silently.

| case | outcome |
|---|---|
| question with no groundable concept | kept; flag ``no_question_concept``; no start node, so no path (a miss) |
| choice with no concept | kept; flag ``choice_without_concept``; the walker has no target for it |
| empty subgraph (nothing grounds) | kept; padded like any other; every figure counts it as a miss |
| gold answer not reachable | kept; ``oracle_hit_rate`` excludes it from the reachable subset |
| duplicate id | a bad line: an error naming both lines, or with ``on_bad_line=skip`` skipped and counted in ``load.duplicate_ids`` |
| non-English text | kept; grounds what it can (here nothing) |
| very long text (5,000 words) | kept; grounding and extraction stay within the subgraph budgets |
"""

import json

import pytest

from configs import test as test_config
from racer_jax.data import prepare
from racer_jax.data.datasets import DEMO_DIR
from racer_jax.walker import evaluation as walker_eval
from racer_jax.walker import stage as walker_stage

QUIET = dict(progress=False, log=lambda _: None)


def _question(qid, stem, choices, answer="A"):
  labels = "ABCDE"
  return json.dumps({"id": qid, "answerKey": answer, "question": {
      "stem": stem, "choices": [{"label": labels[i], "text": c}
                                for i, c in enumerate(choices)]}})


@pytest.mark.slow  # ~20-40 s: prepare, train and evaluate a walker
def test_awkward_questions_have_documented_outcomes(tmp_path):
  long_stem = "Where do you keep milk " + " ".join(["cold"] * 5000) + "?"
  rows = [
      _question("ok", "Where would you put milk to keep it cold?",
                ["refrigerator", "oven", "closet", "garage", "cupboard"]),
      _question("ungrounded", "Xyzzy plugh frobnicate?",
                ["refrigerator", "oven", "closet", "garage", "cupboard"]),
      _question("no-choice-concept", "Where would you put milk?",
                ["qwertyuiop", "oven", "closet", "garage", "cupboard"]),
      _question("nothing", "Zzyzx?", ["qqq", "www", "eee", "rrr", "ttt"]),
      _question("ok", "Where would you put milk to keep it cold?",
                ["refrigerator", "oven", "closet", "garage", "cupboard"]),
      _question("chinese", "你会把牛奶放在哪里保持冷藏？",
                ["冰箱", "烤箱", "衣柜", "车库", "橱柜"]),
      _question("long", long_stem,
                ["refrigerator", "oven", "closet", "garage", "cupboard"]),
  ]
  path = tmp_path / "edge.jsonl"
  path.write_text("\n".join(rows) + "\n", encoding="utf-8")
  config = test_config.get_config()
  config.data.dataset = "jsonl"
  config.data.files = {"train": str(DEMO_DIR / "train.jsonl"),
                       "dev": str(DEMO_DIR / "dev.jsonl"),
                       "edge": str(path)}
  config.data.splits = ("train", "edge")
  config.data.on_bad_line = "skip"  # the repeated "ok" is skipped, counted
  config.prep_dir = str(tmp_path / "prep")
  report = prepare.prepare(config, None, config.prep_dir, **QUIET)
  edge = report["splits"]["edge"]
  # left out, counted: the repeated id and the 25,000-character stem (not
  # a question: refused since issue 39)
  assert edge["questions"] == 5
  assert edge["load"]["duplicate_ids"] == 1 and edge["load"]["skipped"] == 2
  assert any("stem" in line and "not a question" in line
             for line in edge["load"]["bad_lines"])
  flags = edge["flags"]
  assert flags["no_question_concept"] >= 3  # ungrounded, nothing, chinese
  assert flags["choice_without_concept"] >= 1 + 5 + 5  # no-choice, ...
  assert edge["subgraph_nodes"]["max"] <= config.subgraph.max_nodes

  config.data.splits = ("train",)
  walker_stage.train(config, None, tmp_path / "walker", **QUIET)
  figures = walker_eval.evaluate(config, None, tmp_path / "walker",
                                 split="edge", **QUIET)
  assert figures["questions"] == 5
  rows_out = [json.loads(x) for x in (tmp_path / "walker" / "eval").glob(
      "edge_step*/questions.jsonl").__next__().read_text().splitlines()]
  by_id = {}
  for r in rows_out:
    by_id.setdefault(r["id"], []).append(r)
  assert len(by_id["ok"]) == 1
  for qid in ("ungrounded", "nothing", "chinese"):
    r, = by_id[qid]
    assert not any(r["reached"]) and not any(r["oracle"]), qid
    assert r["gold_paths"] == []
  assert by_id["no-choice-concept"][0]["oracle"][0] is False
  assert any(r["reached"][r["gold"]] for r in by_id["ok"])
  assert 0.0 <= figures["path_hit_rate"] <= 1.0
