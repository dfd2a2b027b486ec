"""The rollout benchmark runs end to end and reports its figures."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_rollout_benchmark_on_demo(tmp_path):
  env = {k: v for k, v in os.environ.items() if k != "RACER_DATA_DIR"}
  out = subprocess.run(
      [sys.executable, str(REPO / "launch/benchmark.py"), "rollout",
       "--walkers=1,8", "--walkers_per_question=4", "--repeats=1",
       f"--prep_dir={tmp_path}", "--train_reference=jax_disable_jit"],
      capture_output=True, text=True, check=True, cwd=tmp_path, env=env)
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  assert figures["walkers"] == 8 and figures["data"] == "demo train"
  for key in ("speedup_vs_python_loop", "speedup_vs_numpy_batched",
              "train_update_speedup", "jax_walker_steps_per_second",
              "median_speedup_vs_numpy_batched"):
    assert figures[key] > 0
  # The machine the ratios were measured on.
  assert figures["cpu_count"] == os.cpu_count()
  assert figures["cpu_model"] and figures["cpu_vector_isa"]
  assert figures["jax_version"] and "xla_flags" in figures
  assert figures["train_update_reference"] == "jax_disable_jit"
