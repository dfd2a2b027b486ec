"""One evaluation writer (racer_jax/runs/eval_output.py): every run kind's
evaluation is a folder eval/<name>/ with questions.jsonl, metrics.json and
report.md, and no other module names those files."""

import ast
import json

import pytest

from racer_jax.runs import eval_output
from racer_jax.runs.eval_output import EvalOutput
from tests.conftest import REPO


def test_an_output_holds_records_figures_and_a_report(tmp_path):
  out = EvalOutput(tmp_path, "dev_step7")
  with out.questions() as f:
    f.write(json.dumps({"id": "q1", "correct": True}) + "\n")
  figures = out.finish({"accuracy": 0.5, "sweep": [1, 2], "split": "dev"},
                       title="Walker on dev")
  folder = tmp_path / "eval" / "dev_step7"
  assert json.loads((folder / "metrics.json").read_text()) == figures
  assert figures["per_question_file"] == str(folder / "questions.jsonl")
  report = (folder / "report.md").read_text()
  assert report.startswith("# Walker on dev")
  assert "| accuracy | 0.5 |" in report and "sweep" not in report
  assert eval_output.finished(tmp_path, "dev_step7") == figures


def test_a_new_evaluation_removes_the_last_ones_figures_first(tmp_path):
  EvalOutput(tmp_path, "dev").finish({"accuracy": 0.9}, title="old")
  out = EvalOutput(tmp_path, "dev")   # e.g. a run that then stops
  assert not (out.dir / "metrics.json").exists()
  assert not (out.dir / "report.md").exists()
  assert eval_output.finished(tmp_path, "dev") is None


def test_finish_takes_a_title_or_a_report(tmp_path):
  out = EvalOutput(tmp_path, "dev")
  with pytest.raises(ValueError):
    out.finish({}, title="t", report=["r"])
  assert out.finish({"a": 1}, report=["# mine"])["a"] == 1
  assert (out.dir / "report.md").read_text() == "# mine\n"


def test_the_newest_walker_evaluation_is_found_by_step(tmp_path):
  for step in (5, 40, 300):
    EvalOutput(tmp_path, f"dev_step{step}").finish({"step": step}, title="w")
  EvalOutput(tmp_path, "dev_step900.refiner").finish({"step": 900},
                                                     title="refiner")
  assert eval_output.newest_step(tmp_path, "dev")["step"] == 300
  assert eval_output.newest_step(tmp_path, "test") is None


def test_no_other_module_writes_the_evaluation_files():
  names = {eval_output.METRICS, eval_output.REPORT}
  found = []
  for path in sorted((REPO / "racer_jax").rglob("*.py")):
    if path.name == "eval_output.py":
      continue
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
          node.value in names or node.value.endswith((".metrics.json",
                                                      ".refiner.json"))):
        found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value}")
  assert not found, found
