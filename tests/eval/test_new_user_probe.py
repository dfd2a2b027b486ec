"""What a new user broke in the agents' evaluation (issue 39): a resume
that would answer a changed question file with the old answers, an
evaluation file whose name holds a dot, one labelled question, none, and
seeds that cannot be. Each ends in the right result or a clear refusal."""

import json

import pytest

from racer_jax.data.datasets import DEMO_DIR
from racer_jax.errors import ConfigError
from racer_jax.eval import agents_eval
from racer_jax.train import evaluate_run
from tests.trained_runs import copy_of_run

QUIET = dict(progress=False, log=lambda _: None)
LINES = (DEMO_DIR / "dev.jsonl").read_text().splitlines()


@pytest.fixture(scope="module")
def run_copy(answer_run, tmp_path_factory):
  """A copy of the demo answer run (its critic calibrated once)."""
  return copy_of_run(answer_run, tmp_path_factory, "probe")


def _file(folder, name, lines):
  path = folder / name
  path.write_text("\n".join(lines) + "\n")
  return path


def _evaluate(run_copy, path, **kw):
  config, workdir = run_copy
  return agents_eval.evaluate(config, None, workdir, eval_file=str(path),
                              seeds=1, **kw, **QUIET)


@pytest.mark.slow  # three evaluations of a file that changes (16 s)
def test_resume_refuses_a_changed_question_file(run_copy, tmp_path):
  path = _file(tmp_path, "q.jsonl", LINES[:3])
  first = _evaluate(run_copy, path)
  assert first["questions"] == 3
  _file(tmp_path, "q.jsonl", LINES[3:6])  # same name, other questions
  with pytest.raises(ConfigError, match="questions_sha256"):
    _evaluate(run_copy, path, resume=True)
  again = _evaluate(run_copy, path)  # without --resume: starts over
  rows = [json.loads(x) for x in (run_copy[1] / "eval" / again["name"] /
                                  "full.seed0.jsonl").read_text().splitlines()]
  assert [r["id"] for r in rows] == [json.loads(x)["id"]
                                     for x in LINES[3:6]]
  assert again["questions"] == 3


def test_a_file_name_with_dots(run_copy, tmp_path):
  path = _file(tmp_path, "dev.heldout.v2.jsonl", LINES[:2])
  figures = _evaluate(run_copy, path)
  assert figures["name"].startswith("file_dev_heldout_v2_")
  assert figures["questions"] == 2


def test_one_labelled_question_gets_a_report(run_copy, tmp_path):
  unlabeled = json.loads(LINES[1])
  unlabeled.pop("answerKey", None)
  path = _file(tmp_path, "one.jsonl", [LINES[0], json.dumps(unlabeled)])
  figures = _evaluate(run_copy, path)
  assert figures["labeled"] == 1 and figures["knowledge_gain"] is None
  assert (run_copy[1] / "eval" / figures["name"] / "report.md").is_file()


def test_no_labelled_question_says_so_instead_of_nan(run_copy, tmp_path):
  lines = []
  for line in LINES[:2]:
    record = json.loads(line)
    record.pop("answerKey", None)
    lines.append(json.dumps(record))
  figures = _evaluate(run_copy, _file(tmp_path, "none.jsonl", lines))
  text = evaluate_run.figures_text(figures, "agents", run_copy[1])
  assert "nan" not in text and "no question is labelled" in text
  report = (run_copy[1] / "eval" / figures["name"] / "report.md").read_text()
  assert "No question is labelled" in report


@pytest.mark.parametrize("seeds", [0, -2])
def test_seeds_that_cannot_be(run_copy, seeds):
  _, workdir = run_copy
  config = evaluate_run.load_run_config(workdir)
  with pytest.raises(ConfigError, match=f"--seeds={seeds}: must be at least"):
    evaluate_run.evaluate_run(config, None, workdir, {"seeds": seeds},
                              progress=False)


def test_a_stopped_evaluation_leaves_no_stale_report(run_copy, tmp_path,
                                                     monkeypatch):
  from racer_jax.eval import passes
  path = _file(tmp_path, "stop.jsonl", LINES[:2])
  out = run_copy[1] / "eval" / _evaluate(run_copy, path)["name"]
  assert (out / "report.md").is_file()

  def interrupted(*args, **kwargs):
    raise KeyboardInterrupt
  monkeypatch.setattr(passes, "run_pass", interrupted)
  with pytest.raises(KeyboardInterrupt):
    _evaluate(run_copy, path)
  assert not (out / "report.md").exists()
  assert not (out / "metrics.json").exists()
