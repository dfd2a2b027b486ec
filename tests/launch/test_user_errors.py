"""A user's own mistakes end in one ``error:`` line naming what is wrong
(exit status 1, no traceback), and a flag that does not apply is refused
rather than ignored; each case is one a new user ran into."""

import os
import subprocess
import sys

import pytest

from configs import demo
from racer_jax.errors import ConfigError
from racer_jax.eval import answer_one
from racer_jax.runs.config_checks import check_config
from racer_jax.train import evaluate_run
from tests.conftest import REPO
from tests.launcher_probe import run_forked


@pytest.fixture(scope="module")
def fake_walker_run(tmp_path_factory):
  """A folder that looks like a trained walker run (its config only)."""
  folder = tmp_path_factory.mktemp("fake_walker_run")
  (folder / "config.json").write_text(demo.get_config().to_json())
  return folder


def _error_line(script, *args, cwd):
  env = {k: v for k, v in os.environ.items()
         if k not in ("RACER_DATA_DIR", "RACER_TRACEBACK")}
  out = subprocess.run([sys.executable, str(REPO / "launch" / script),
                        *map(str, args)], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=300)
  assert out.returncode == 1, (out.returncode, out.stderr[-3000:])
  lines = out.stderr.strip().splitlines()
  assert "Traceback" not in out.stderr, out.stderr[-3000:]
  assert lines and lines[-1].startswith("error: "), out.stderr[-3000:]
  return lines[-1]


def test_choices_are_checked():
  assert answer_one.checked_choices("q?", [" oven", "freezer "]) == [
      "oven", "freezer"]
  for choices, said in ((["freezer", "freezer", "oven"], "repeats freezer"),
                        (["freezer", "", "oven"], "empty choice"),
                        (["freezer"], "at least two")):
    with pytest.raises(ConfigError, match=said):
      answer_one.checked_choices("q?", choices)
  with pytest.raises(ConfigError, match="question is empty"):
    answer_one.checked_choices("  ", ["a", "b"])


def test_a_walker_run_is_not_an_answer_run(fake_walker_run):
  with pytest.raises(ConfigError, match="is a walker run"):
    answer_one.answer_run_config(fake_walker_run)


def test_options_of_other_runs_are_refused():
  evaluate_run.refuse_inapplicable("agents", {"eval_file", "seeds"})
  with pytest.raises(ConfigError, match="--eval_file does not apply to a "
                     "walker evaluation"):
    evaluate_run.refuse_inapplicable("walker", {"eval_file"})
  # issue 51: "a agents evaluation"
  with pytest.raises(ConfigError, match="--taus does not apply to an "
                     "agents evaluation"):
    evaluate_run.refuse_inapplicable("agents", {"taus"})


@pytest.mark.parametrize("field", ["eval.batch_size", "subgraph.max_nodes"])
def test_config_fields_entry_points_read_are_checked(field):
  config = demo.get_config()
  section, name = field.split(".")
  config[section][name] = 0
  with pytest.raises(ConfigError, match=field):
    check_config(config)


def test_jsonl_files_can_be_set_from_the_command_line():
  config = demo.get_config()
  config.data.files.train = "questions.jsonl"  # was an empty ConfigDict
  assert config.data.files.train == "questions.jsonl"


CASES = {
    "misspelled config key": (
        "evaluate.py", ["--workdir={run}", "--config=" + str(
            REPO / "configs/demo.py"), "--config.walker.top_kk=3"],
        "top_kk"),
    "batch size 0": (
        "evaluate.py", ["--workdir={run}", "--config=" + str(
            REPO / "configs/demo.py"), "--config.eval.batch_size=0"],
        "eval.batch_size"),
    "eval_file on a walker run": (
        "evaluate.py", ["--workdir={run}", "--eval_file={run}/config.json"],
        "--eval_file does not apply"),
    "answering with a walker run": (
        "answer.py", ["--workdir={run}", "--question=Where?",
                      "--choices=freezer,oven"], "is a walker run"),
    "duplicate choices": (
        "answer.py", ["--workdir={run}", "--question=Where?",
                      "--choices=freezer,freezer,oven"], "repeats freezer"),
    "no subgraph nodes": (
        "prepare.py", ["--config=" + str(REPO / "configs/demo.py"),
                       "--config.subgraph.max_nodes=0", "--out_dir={run}/p"],
        "subgraph.max_nodes"),
    "jsonl file missing": (
        "prepare.py", ["--config=" + str(REPO / "configs/demo.py"),
                       "--config.data.dataset=jsonl",
                       "--config.data.files.train={run}/missing.jsonl",
                       "--out_dir={run}/p"], "missing.jsonl not found"),
    "another benchmark's flag": (
        "benchmark.py", ["prepare", "--kg_walkers=4"],
        "--kg_walkers is a flag of the kg_rollout benchmark"),
    "a stray argument": (
        "evaluate.py", ["--workdir={run}", "dev"], "unexpected argument"),
}


# Each case runs the launcher as `python launch/X.py ARGS` would (as
# __main__, its own argv, the cwd a fresh folder, no RACER_DATA_DIR), in a
# fork of one interpreter that imported the launchers' modules once.
_LAUNCH = """\
        os.chdir(job[2])
        for name in ("RACER_DATA_DIR", "RACER_TRACEBACK"):
          os.environ.pop(name, None)
        sys.argv = [job[0], *job[1]]
        try:
          runpy.run_path(job[0], run_name="__main__")
        except SystemExit as stop:
          code = stop.code if isinstance(stop.code, int) else 1\
"""


@pytest.fixture(scope="module")
def error_outputs(fake_walker_run, tmp_path_factory):
  """Per case, ``(exit status, error output's last lines)``."""
  cases = sorted(CASES)
  jobs = [[str(REPO / "launch" / CASES[c][0]),
           [a.format(run=fake_walker_run) for a in CASES[c][1]],
           str(tmp_path_factory.mktemp("cwd"))] for c in cases]
  return dict(zip(cases, run_forked(_LAUNCH, jobs, tail=200)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_entry_points_fail_in_one_line(case, error_outputs):
  code, lines = error_outputs[case]
  text = "\n".join(lines)
  assert code == 1, (code, text[-3000:])
  assert "Traceback" not in text, text[-3000:]
  assert lines and lines[-1].startswith("error: "), text[-3000:]
  assert CASES[case][2] in lines[-1], lines[-1]


def test_a_fallback_is_said_in_the_text_output():
  llm = {"llm_calls": 12, "llm_cache_hits": 0, "input_tokens": 0,
         "output_tokens": 0, "fallbacks": 12,
         "llm_errors": {"ConnectionError": 12}}
  text = evaluate_run.figures_text({"accuracy": 0.5, "llm": llm}, "agents",
                                   "unused")
  assert "12 answers or verdicts FELL BACK to the local models" in text
  assert "ConnectionError" in text
  quiet = evaluate_run.figures_text({"accuracy": 0.5, "llm": {
      **llm, "llm_calls": 0, "fallbacks": 0, "llm_errors": {}}}, "agents",
      "unused")
  assert "FELL BACK" not in quiet


def test_a_checkpoint_folder_that_cannot_be_written_fails_at_start(tmp_path):
  """Issue 39: `echo x > W/checkpoints` then train: the error came at the
  first save, then the process hung five minutes in orbax's threads."""
  work = tmp_path / "W"
  work.mkdir()
  (work / "checkpoints").write_text("x")
  line = _error_line("train.py", "--config=" + str(REPO / "configs/demo.py"),
                     f"--workdir={work}", "--progress=false", cwd=tmp_path)
  assert "checkpoints is a file, not a folder" in line


_SAVE_FAILS = """
import os, shutil
from pathlib import Path
import numpy as np
from racer_jax import entry_point
from racer_jax.runs.checkpoints import Checkpointer

def main():
  folder = Path(os.environ["CKPT_DIR"])
  ckpt = Checkpointer(folder)
  shutil.rmtree(folder)
  folder.write_text("x")  # the folder is gone by the first save
  ckpt.save(1, {"w": np.zeros(3, np.float32)}, {})

entry_point.run(main)
"""


def test_a_save_that_fails_mid_run_ends_at_once_in_one_line(tmp_path):
  env = {**os.environ, "CKPT_DIR": str(tmp_path / "ckpt")}
  env.pop("RACER_TRACEBACK", None)
  out = subprocess.run([sys.executable, "-c", _SAVE_FAILS],
                       capture_output=True, text=True, env=env, timeout=60,
                       cwd=REPO)
  assert out.returncode == 1
  assert "Traceback" not in out.stderr, out.stderr[-2000:]
  assert out.stderr.strip().splitlines()[-1].startswith(
      "error: could not save checkpoint 1 in")


def test_ctrl_c_is_one_line_not_a_traceback(tmp_path):
  script = ("from racer_jax import entry_point\n"
            "def main():\n  raise KeyboardInterrupt\n"
            "entry_point.run(main)\n")
  env = {k: v for k, v in os.environ.items() if k != "RACER_TRACEBACK"}
  out = subprocess.run([sys.executable, "-c", script], capture_output=True,
                       text=True, env=env, timeout=60, cwd=REPO)
  assert out.returncode == 130 and "Traceback" not in out.stderr
  assert out.stderr.strip().splitlines()[-1].startswith(
      "error: interrupted (Ctrl-C)")


def test_progress_false_turns_every_bar_off(tmp_path):
  """Issue 51: tqdm bars (the LLM calls', the explorer's) still showed
  under --progress=false."""
  script = tmp_path / "bars.py"
  script.write_text(
      "from absl import flags\n"
      "from racer_jax import entry_point\n"
      "from racer_jax.errors import bars_off\n"
      "import tqdm\n"
      "flags.DEFINE_bool('progress', True, 'bars')\n"
      "def main():\n"
      "  for _ in tqdm.tqdm(range(3), desc='llm bar', disable=bars_off()):"
      " pass\n"
      "entry_point.run(main)\n")
  for progress, shown in (("true", True), ("false", False)):
    out = subprocess.run([sys.executable, str(script),
                          f"--progress={progress}"], capture_output=True,
                         text=True, cwd=REPO, env={**os.environ,
                                                   "TQDM_DISABLE": ""})
    assert out.returncode == 0, out.stderr
    assert ("llm bar" in out.stderr) == shown
