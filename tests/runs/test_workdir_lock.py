"""One process per run folder (issue 39: two train.py on one workdir both
crashed inside orbax, one hung, metrics.jsonl interleaved)."""

import os
import signal
import subprocess
import sys
import time

import pytest

from racer_jax.errors import ConfigError
from racer_jax.runs import workdir_lock
from tests.conftest import REPO


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
  with workdir_lock.hold(tmp_path):
    with pytest.raises(ConfigError, match=f"in use by pid {os.getpid()} on"):
      with workdir_lock.hold(tmp_path):
        pass
    with workdir_lock.hold(tmp_path, process_index=1):
      pass  # another process of the same multi-process job
  with workdir_lock.hold(tmp_path):
    pass  # released on exit


_HOLD = """
import sys, time
from racer_jax.runs import workdir_lock
with workdir_lock.hold(sys.argv[1]):
  print("held", flush=True)
  time.sleep(60)
"""


def test_a_killed_holder_leaves_no_stuck_lock(tmp_path):
  holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
  assert holder.stdout.readline().strip() == "held"
  with pytest.raises(ConfigError, match=f"pid {holder.pid}"):
    with workdir_lock.hold(tmp_path):
      pass
  holder.send_signal(signal.SIGKILL)
  holder.wait(10)
  with workdir_lock.hold(tmp_path):
    pass


def test_a_second_train_on_a_busy_workdir_is_refused(tmp_path):
  work = tmp_path / "W"
  command = [sys.executable, str(REPO / "launch" / "train.py"),
             "--config=" + str(REPO / "configs/test.py"), f"--workdir={work}",
             "--progress=false"]
  env = {k: v for k, v in os.environ.items() if k != "RACER_TRACEBACK"}
  first = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, cwd=tmp_path, env=env)
  try:
    lock = work / ".lock.p0"
    deadline = time.monotonic() + 120
    while not (lock.exists() and lock.read_text()):
      assert first.poll() is None and time.monotonic() < deadline
      time.sleep(0.1)
    second = subprocess.run(command, capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=120)
  finally:
    first.kill()
    first.wait(30)
  assert second.returncode == 1
  last = second.stderr.strip().splitlines()[-1]
  assert last.startswith("error: ") and f"pid {first.pid}" in last, last
