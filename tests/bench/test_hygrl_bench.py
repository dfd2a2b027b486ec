"""The hygrl benchmark runs end to end on the demo and reports its figures."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_hygrl_benchmark_on_demo(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != "RACER_DATA_DIR"}
  out = subprocess.run(
      [sys.executable, str(REPO / "launch/benchmark.py"), "hygrl",
       "--hygrl_questions=6", "--hygrl_repeats=1",
       "--hygrl_python_questions=3", f"--prep_dir={tmp_path}"],
      capture_output=True, text=True, check=True, cwd=tmp_path, env=env)
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  assert figures["data"] == "demo train" and figures["questions"] == 6
  for key in ("beam_speedup_vs_python_reference",
              "beam_questions_per_second_jax",
              "beam_questions_per_second_python",
              "update_questions_per_second", "beam_compile_s",
              "update_compile_s"):
    assert figures[key] > 0, key
  assert figures["python_timed_questions"] == 3
  assert figures["reference_agreement"] == 3  # same sequences as JAX
  assert figures["update_metrics"]["finite"] == 1.0
  # one fusion weight per graph heuristic, plus "grounds a choice" when the
  # heuristic is given the policy's information (the default)
  assert figures["config"]["heuristic_choice"] is True
  assert len(figures["config"]["theta"]) == 5
