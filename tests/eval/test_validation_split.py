"""``--split=validation``: refiner and whole-graph walker runs evaluated on
the training questions they left out (the slice their defaults are chosen
on), other runs refused in one line."""

import json

import pytest

from racer_jax.data import datasets, qa, validation
from racer_jax.errors import ConfigError
from racer_jax.refiner import evaluation as refiner_eval
from racer_jax.walker import evaluation as walker_eval
from racer_jax.train import evaluate_run
from racer_jax.walker import stage as walker_stage
from tests.trained_runs import QUIET, retrieval_runs, walker_run  # noqa: F401


def _held_out(config):
  """The labeled training questions of the validation slice, by id."""
  examples, _ = qa.load_jsonl(datasets.split_path(config, "train", None))
  rows = validation.split_rows(config, len(examples))[1]
  assert 0 < len(rows) < len(examples)
  return {examples[i].id for i in rows if examples[i].answer_index is not None}


def test_refiner_evaluates_the_slice_it_never_trained_on(retrieval_runs):
  config, _, refiner_dir = retrieval_runs
  held = _held_out(config)
  on_slice = refiner_eval.evaluate(config, None, refiner_dir,
                                   split="validation", **QUIET)
  assert on_slice["split"] == "validation"
  assert on_slice["labeled"] == len(held)   # not dev's, nor all of train's
  out = refiner_dir / "eval" / "validation_step10.refiner"
  assert json.loads((out / "metrics.json").read_text()) == on_slice
  assert on_slice["per_question_file"] == str(out / "questions.jsonl")
  assert "| hit_rate_memory_on |" in (out / "report.md").read_text()
  rows = [json.loads(line) for line in open(on_slice["per_question_file"])]
  assert {r["id"] for r in rows} == held
  assert sum(r["gold_in_topk"] for r in rows) == round(
      on_slice["gold_in_topk_refiner"] * len(held))
  assert sum(r["correct"] for r in rows) == round(
      on_slice["refiner_choice_accuracy"] * len(held))


@pytest.mark.slow  # trains a small walker (~1 min on 2 cores)
def test_walker_rows_are_exactly_the_slice(walker_run, tmp_path):
  config, _ = walker_run
  config = config.copy_and_resolve_references()
  config.walker.bandwidth = 16
  config.train.num_steps = 1
  walker_stage.train(config, None, tmp_path / "kg", **QUIET)
  figures = walker_eval.evaluate(config, None, tmp_path / "kg",
                                split="validation", **QUIET)
  rows = [json.loads(line) for line in open(
      tmp_path / "kg" / "eval" / f"validation_step{figures['step']}" /
      "questions.jsonl")]
  assert {r["id"] for r in rows} == _held_out(config)
  assert figures["labeled"] == len(_held_out(config))


def test_other_runs_and_runs_without_a_slice_are_refused(retrieval_runs):
  config, walker_dir, refiner_dir = retrieval_runs
  hygrl = config.copy_and_resolve_references()
  hygrl.method, hygrl.train.stage = "hygrl", "walker"   # refused at once
  with pytest.raises(ConfigError, match="only walker and refiner runs"):
    evaluate_run.evaluate_run(hygrl, None, walker_dir,
                              {"split": "validation"}, progress=False)
  config = config.copy_and_resolve_references()
  config.answer.validation_fraction = 0.0
  with pytest.raises(ConfigError, match="kept none"):
    refiner_eval.evaluate(config, None, refiner_dir, split="validation",
                          **QUIET)
