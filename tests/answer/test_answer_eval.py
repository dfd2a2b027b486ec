"""The answer model alone from its checkpoint, and ensembles of answer runs:
the recomputed figure equals the one the answer stage wrote at the end of
training, the ensemble is the members' mean, and finished members are
reused."""

import json

import numpy as np
import pytest

from racer_jax.answer import evaluation as answer_eval
from tests.trained_runs import QUIET, _train_answer


def _rows(path):
  return [json.loads(x) for x in path.read_text().splitlines()]


def test_answer_only_equals_the_training_evaluation(answer_run):
  config, workdir = answer_run
  [trained] = (workdir / "eval").glob("dev_step*.answer.jsonl")
  figures = answer_eval.evaluate(config, None, workdir, **QUIET)
  out = workdir.resolve() / "eval" / "dev.answer_only"
  got, want = _rows(out / "member0.answer.jsonl"), _rows(trained)
  assert [r["id"] for r in got] == [r["id"] for r in want]
  np.testing.assert_allclose([p for r in got for p in r["probs"]],
                             [p for r in want for p in r["probs"]],
                             atol=2e-4)
  assert [r["knowledge"] for r in got] == [r["knowledge"] for r in want]
  accuracy = np.mean([r["prediction"] == r["gold"] for r in want])
  assert figures["accuracy"] == pytest.approx(accuracy)
  assert figures["accuracy_members"] == [figures["accuracy"]]
  assert figures["questions"] == len(want)
  ensemble = _rows(out / "questions.jsonl")
  assert [r["probs"] for r in ensemble] == [r["probs"] for r in got]
  assert json.loads((out / "metrics.json").read_text()) == figures
  assert "| accuracy |" in (out / "report.md").read_text()
  # A rerun reuses the finished member file instead of recomputing it.
  said = []
  again = answer_eval.evaluate(config, None, workdir, progress=False,
                               log=said.append)
  assert again == figures
  assert any("reusing member0.answer.jsonl" in s for s in said)


def test_ensemble_probs_is_the_members_mean():
  a = np.array([[0.7, 0.3], [0.2, 0.8]], np.float32)
  b = np.array([[0.1, 0.9], [0.4, 0.6]], np.float32)
  np.testing.assert_allclose(answer_eval.ensemble_probs([a, b]),
                             [[0.4, 0.6], [0.3, 0.7]])
  with pytest.raises(ValueError, match="disagree"):
    answer_eval.ensemble_probs([a, b[:1]])
  with pytest.raises(ValueError, match="at least one"):
    answer_eval.ensemble_probs([])


def test_a_member_that_is_not_an_answer_run_is_refused(answer_run,
                                                       retrieval_runs):
  config, workdir = answer_run
  _, walker_dir, _ = retrieval_runs
  with pytest.raises(ValueError, match="not 'answer'"):
    answer_eval.evaluate(config, None, workdir, ensemble=[walker_dir],
                         **QUIET)
  with pytest.raises(FileNotFoundError, match="config.json"):
    answer_eval.evaluate(config, None, workdir,
                         ensemble=[workdir / "nowhere"], **QUIET)


@pytest.mark.slow  # trains a second answer run
def test_ensemble_of_runs_with_different_knowledge(answer_run,
                                                   retrieval_runs,
                                                   tmp_path_factory):
  config, workdir = answer_run
  # Another seed, shown each choice's own triples besides the paths.
  other_config, other = _train_answer(
      retrieval_runs, tmp_path_factory, "answer_triples", max_length=64,
      batch_size=8, epochs=1.0, choice_triples=2)
  assert other_config.answer.choice_triples == 2
  figures = answer_eval.evaluate(config, None, workdir, ensemble=[other],
                                 **QUIET)
  out = workdir.resolve() / "eval" / "dev.answer_only"
  first = _rows(out / "member0.answer.jsonl")
  second = _rows(out / "member1.answer.jsonl")
  [trained] = (other / "eval").glob("dev_step*.answer.jsonl")
  # Each member is shown its own knowledge: the second its choice triples.
  assert ([r["knowledge"] for r in second] ==
          [r["knowledge"] for r in _rows(trained)])
  assert [r["knowledge"] for r in second] != [r["knowledge"] for r in first]
  ensemble = _rows(out / "questions.jsonl")
  for e, a, b in zip(ensemble, first, second):
    np.testing.assert_allclose(
        e["probs"], (np.array(a["probs"]) + np.array(b["probs"])) / 2,
        atol=1e-5)
    assert e["prediction"] == int(np.argmax(e["probs"]))
  gold = np.array([r["gold"] for r in ensemble])
  assert figures["accuracy"] == pytest.approx(
      np.mean([r["prediction"] for r in ensemble] == gold))
  assert figures["accuracy_members"] == pytest.approx(
      [np.mean([r["prediction"] for r in m] == gold)
       for m in (first, second)])
  assert figures["members"] == [str(workdir.resolve()), str(other.resolve())]
