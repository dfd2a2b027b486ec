"""What the second hour of a new user broke (issue 51), each item with a
check that fails without its fix."""

import hashlib
import json
import subprocess
import sys

import ml_collections
import numpy as np
import pytest

from configs import default as default_config
from racer_jax.agents.answer_agent import LocalAnswerer
from racer_jax.data import qa
from racer_jax.data.datasets import DEMO_DIR
from racer_jax.errors import ConfigError
from racer_jax.eval import agents_eval, head_only
from racer_jax.llm import llm_backends
from tests.conftest import REPO
from tests.trained_runs import copy_of_run

QUIET = dict(progress=False, log=lambda _: None)


@pytest.fixture(scope="module")
def run_copy(answer_run, tmp_path_factory):
  """A copy of the demo answer run (its critic calibrated once)."""
  return copy_of_run(answer_run, tmp_path_factory, "probe51")


@pytest.mark.slow  # evaluations of the demo answer run
def test_head_only_accuracy_is_over_the_questions_evaluated(run_copy):
  config, workdir = run_copy
  figures = agents_eval.evaluate(config, None, workdir, seeds=1,
                                 max_questions=5, **QUIET)
  examples = qa.load_jsonl(DEMO_DIR / "dev.jsonl")[0]
  right = head_only.head_only_correct(LocalAnswerer(workdir),
                                      examples)
  first5 = np.mean([right[e.id] for e in examples[:5]])
  # the demo's first five differ from its whole split, so the check bites
  assert first5 != np.mean(list(right.values()))
  assert figures["questions"] == 5
  assert figures["accuracy_answer_head_only"] == first5


@pytest.mark.parametrize("flag", [{"model": "smollm2"},
                                  {"base_url": "http://127.0.0.1:8000/v1"}])
def test_llm_flags_without_a_backend_are_refused(flag):
  """--model or --base_url on a run saved with the local models would be
  ignored and a local evaluation run in their place."""
  saved = ml_collections.ConfigDict(json.loads(
      default_config.get_config().to_json()))
  with pytest.raises(ConfigError, match=f"--{next(iter(flag))} names an "
                     "LLM.*add --backend"):
    llm_backends.evaluation_agents(saved, **flag)
  # with a backend they are taken
  agents = llm_backends.evaluation_agents(saved, backend="openai", **flag)
  assert agents[next(iter(flag))] == next(iter(flag.values()))


LINES = (DEMO_DIR / "dev.jsonl").read_text().splitlines()


def _file(folder, name, lines):
  folder.mkdir(parents=True, exist_ok=True)
  (folder / name).write_text("\n".join(lines) + "\n")
  return folder / name


@pytest.mark.slow  # evaluations of the demo answer run
def test_eval_files_whose_names_meet_get_folders_of_their_own(run_copy,
                                                             tmp_path):
  """q.v1.jsonl, q_v1.jsonl and another folder's q.v1.jsonl once wrote one
  eval folder, each overwriting the last; the report names the file."""
  config, workdir = run_copy
  files = [_file(tmp_path, "q.v1.jsonl", LINES[:2]),
           _file(tmp_path, "q_v1.jsonl", LINES[2:4]),
           _file(tmp_path / "other", "q.v1.jsonl", LINES[4:6])]
  names = set()
  for path in files:
    figures = agents_eval.evaluate(config, None, workdir, eval_file=str(path),
                                   seeds=1, **QUIET)
    names.add(figures["name"])
    report = (workdir / "eval" / figures["name"] / "report.md").read_text()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert f"`{path.resolve()}` (sha256 `{digest}`)" in report
  assert len(names) == 3


@pytest.mark.slow  # evaluations of the demo answer run
def test_a_second_evaluation_into_a_busy_folder_is_refused(run_copy,
                                                          tmp_path):
  config, workdir = run_copy
  path = _file(tmp_path, "busy.jsonl", LINES[:2])
  figures = agents_eval.evaluate(config, None, workdir, eval_file=str(path),
                                 seeds=1, **QUIET)
  folder = workdir / "eval" / figures["name"]
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys, time\n"
       "from racer_jax.runs import workdir_lock\n"
       "with workdir_lock.hold(sys.argv[1]):\n"
       "  print('held', flush=True); time.sleep(60)", str(folder)],
      stdout=subprocess.PIPE, text=True, cwd=REPO)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(ConfigError, match=f"{folder} is in use by pid "
                       f"{holder.pid} on .*: one process per evaluation "
                       "folder"):
      agents_eval.evaluate(config, None, workdir, eval_file=str(path),
                           seeds=1, **QUIET)
  finally:
    holder.kill()
    holder.wait()
  # once it is gone, the folder is free again
  agents_eval.evaluate(config, None, workdir, eval_file=str(path), seeds=1,
                       resume=True, **QUIET)


def test_the_figure_draws_only_reaching_walks_as_evidence():
  """A walk aimed at the chosen choice that ended elsewhere was drawn in
  the evidence colour."""
  from racer_jax.eval import plots

  def path(reached, tail):
    return {"triples": [{"head": "dog", "relation": "isa", "tail": tail}],
            "reached": reached}
  record = {"question": "q?", "choices": ["animal", "rock"], "gold": 0,
            "prediction": 0, "deciding_turn": 0,
            "rounds": [{"paths": [[path(True, "animal"), path(False, "cat")],
                                  [path(True, "rock")]]}]}
  fig = plots.reasoning_paths_figure(record)
  lines = [(l.get_color(), l.get_linestyle()) for l in fig.axes[0].lines]
  assert lines == [(plots.RIGHT, "-"), (plots.UNREACHED, ":"),
                   (plots.OTHER, "-")]
  plots.plt.close(fig)
