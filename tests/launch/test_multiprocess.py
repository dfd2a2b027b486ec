"""launch/train.py across processes: 2 processes x 4 CPU devices (gloo
collectives over 127.0.0.1), each keeping its rows of every batch, train
the demo walker to the same parameters as one process with 8 devices; a
killed peer makes the survivor exit with a clear error instead of
hanging."""

import os
import signal
import socket
import subprocess
import sys
import time

import chex
import pytest

from configs import test as test_config
from racer_jax.walker import update as train_lib
from racer_jax.walker import run as walker_run
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.workspace import load_workspace
from tests.conftest import REPO

QUIET = dict(progress=False, log=lambda _: None)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _flags(tmp_path, steps, extra=()):
  return [sys.executable, str(REPO / "launch/train.py"),
          "--config=" + str(REPO / "configs/test.py"),
          "--config.batch.batch_size=8", f"--config.train.num_steps={steps}",
          "--config.train.checkpoint_every=5", "--config.train.log_every=5",
          f"--config.prep_dir={tmp_path / 'prep'}", "--progress=false",
          *extra]


def _env(devices):
  # Without the tests' persistent compilation cache (tests/conftest.py):
  # its size limit takes a cross-process file lock on every lookup, and on
  # CI's cold cache, beside the other xdist worker's writes, a process of a
  # pair once made no step for 60 s.
  env = {k: v for k, v in os.environ.items()
         if k not in ("RACER_DATA_DIR", "JAX_COORDINATOR_ADDRESS",
                      "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
         and not k.startswith("JAX_COMPILATION_CACHE")}
  env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
  env["JAX_PLATFORMS"] = "cpu"
  return env


def _start_pair(tmp_path, workdir, steps, extra=()):
  port = _free_port()
  return [subprocess.Popen(
      _flags(tmp_path, steps, extra) + [
          f"--workdir={workdir}", f"--coordinator_address=127.0.0.1:{port}",
          "--num_processes=2", f"--process_id={i}"],
      cwd=tmp_path, env=_env(4), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) for i in range(2)]


KG = ("--config.walker.bandwidth=16",)


def _final(workdir, steps):
  config = test_config.get_config()
  config.prep_dir = str(workdir.parent / "prep")
  ws = load_workspace(config, None, config.prep_dir, ["train"], **QUIET)
  policy = walker_run.make_policy(config)
  opt = train_lib.make_optimizer(config.train.learning_rate,
                                 config.train.grad_clip)
  template = train_lib.create_train_state(policy, opt, config.seed,
                                          ws.concept_emb.shape[1])
  ckpt = Checkpointer(workdir / "checkpoints")
  state, _, step = ckpt.restore_latest(template, log=lambda _: None)
  ckpt.close()
  assert step == steps
  return state


@pytest.mark.slow  # ~1-2 min: three JAX processes plus one
@pytest.mark.xdist_group("processes")   # one multi-process test at a time
def test_two_processes_match_one_process_with_eight_devices(tmp_path):
  # the batches are small id arrays: each process reads them all and keeps
  # its rows
  steps = 10
  single = subprocess.run(_flags(tmp_path, steps, KG) + [
      f"--workdir={tmp_path / 'single'}"],
      cwd=tmp_path, env=_env(8),
      capture_output=True, text=True, timeout=600)
  assert single.returncode == 0, single.stderr[-3000:]
  procs = _start_pair(tmp_path, tmp_path / "multi", steps, KG)
  outs = [p.communicate(timeout=600) for p in procs]
  for p, (_, err) in zip(procs, outs):
    assert p.returncode == 0, err[-3000:]
  reports = [[x for x in out.splitlines() if x.startswith("{")]
             for out, _ in outs]
  assert len(reports[0]) == 1 and not reports[1]  # process 0 reports
  lines = (tmp_path / "multi" / "metrics.jsonl").read_text().splitlines()
  assert len(lines) == steps // 5  # logged once, by process 0
  chex.assert_trees_all_close(_final(tmp_path / "single", steps),
                              _final(tmp_path / "multi", steps),
                              rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.xdist_group("processes")
def test_killed_peer_makes_the_survivor_fail_cleanly(tmp_path):
  procs = _start_pair(tmp_path, tmp_path / "kill", 100000, [
      "--heartbeat_timeout_s=10", "--config.train.stall_timeout_s=120"])
  first = tmp_path / "kill" / "checkpoints" / "5" / "commit_success.txt"
  deadline = time.time() + 600
  while not first.exists():
    if not all(p.poll() is None for p in procs):
      for p in procs:
        if p.poll() is None:
          p.kill()
      pytest.fail("a process ended before the first checkpoint:\n" + "\n".join(
          f"process {i} (exit {p.wait()}):\n{p.stderr.read()[-3000:]}"
          for i, p in enumerate(procs)))
    assert time.time() < deadline
    time.sleep(0.1)
  procs[1].send_signal(signal.SIGKILL)
  killed_at = time.time()
  try:
    _, err = procs[0].communicate(timeout=300)
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  assert procs[0].returncode != 0
  assert time.time() - killed_at < 300
  # Three clean ends, depending on which notices first: the stall watchdog,
  # JAX's coordination-service heartbeat, or gloo itself aborting the
  # collective when the dead peer's connection closes (seen under load).
  assert ("a peer process has probably died" in err or
          "heartbeat" in err.lower() or "gloo::EnforceNotMet" in err), (
              err[:2000] + "\n...\n" + err[-2000:])
