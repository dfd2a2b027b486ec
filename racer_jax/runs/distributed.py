"""Multi-process (multi-host) runs: start-up and host copies of global arrays.

``initialize`` calls :func:`jax.distributed.initialize` when a run spans
processes — from explicit arguments (``launch/train.py``'s
``--coordinator_address``, ``--num_processes``, ``--process_id``) or the
usual environment variables (``JAX_COORDINATOR_ADDRESS``,
``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``; on TPU pods, SLURM and other
clusters JAX detects them itself with ``--distributed=auto``). On CPU the
cross-process collectives go through gloo. A peer that stops answering
heartbeats for ``heartbeat_timeout_s`` makes the others fail with JAX's
error instead of waiting forever.

Every process then builds the same global :class:`jax.sharding.Mesh` over
all devices; each one pads and transfers only its own rows of every global
batch (:func:`racer_jax.runs.parallel.shard_batch`), orbax writes each
checkpoint once (all processes take part, the primary writes the
metadata), and only process 0 logs metrics.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import jax
import numpy as np
from jax.experimental import multihost_utils

_ENV = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def initialize(coordinator_address: str | None = None,
               num_processes: int | None = None,
               process_id: int | None = None, *, auto: bool = False,
               heartbeat_timeout_s: int = 100,
               initialization_timeout_s: int = 300) -> bool:
  """Joins a multi-process run if one is configured; returns whether it
  did. Must run before anything touches a JAX device."""
  coordinator_address = (coordinator_address or
                         os.environ.get("JAX_COORDINATOR_ADDRESS"))
  if num_processes is None and os.environ.get("JAX_NUM_PROCESSES"):
    num_processes = int(os.environ["JAX_NUM_PROCESSES"])
  if process_id is None and os.environ.get("JAX_PROCESS_ID"):
    process_id = int(os.environ["JAX_PROCESS_ID"])
  if not auto and coordinator_address is None:
    if num_processes not in (None, 1):
      raise ValueError(f"num_processes={num_processes} needs a coordinator "
                       "address (--coordinator_address or "
                       "JAX_COORDINATOR_ADDRESS)")
    return False
  if not auto and (num_processes is None or process_id is None):
    raise ValueError("a multi-process run needs --num_processes and "
                     "--process_id (or JAX_NUM_PROCESSES / JAX_PROCESS_ID) "
                     f"with coordinator {coordinator_address}")
  if jax.config.jax_platforms in (None, "", "cpu") or os.environ.get(
      "JAX_PLATFORMS", "") == "cpu":
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(
      coordinator_address=coordinator_address, num_processes=num_processes,
      process_id=process_id, heartbeat_timeout_seconds=heartbeat_timeout_s,
      initialization_timeout=initialization_timeout_s)
  return True


def is_primary() -> bool:
  return jax.process_index() == 0


def to_host(tree):
  """NumPy copies of every leaf, also of arrays spread over processes
  (replicated: the local copy; sharded: gathered from all processes)."""

  def one(x):
    if not isinstance(x, jax.Array):
      return x
    if x.is_fully_addressable:
      return np.asarray(x)
    if x.sharding.is_fully_replicated:
      return np.asarray(x.addressable_data(0))
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return jax.tree.map(one, tree)


class StallWatchdog:
  """Ends the process with a clear error when the training loop makes no
  progress for ``timeout_s`` seconds.

  In a multi-process run a peer that dies leaves the others blocked inside
  a cross-process collective (gloo on CPU waits a long time, and JAX's
  heartbeat does not interrupt a running collective), so the loop reports
  progress (:meth:`beat`) after every update and a daemon thread exits the
  process, exit status 75, once the beats stop. The clock starts at the
  first beat (after the first update, which compiles); a later compile of
  a new shape happens inside an update, so ``timeout_s`` must exceed it.
  """

  EXIT_STATUS = 75

  def __init__(self, timeout_s: float, what: str = "training"):
    self.timeout_s, self.what = float(timeout_s), what
    self._time = time.monotonic
    self._last = None  # armed by the first beat
    self._step = None
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._watch, daemon=True,
                                    name="racer-stall-watchdog")

  def start(self) -> "StallWatchdog":
    self._thread.start()
    return self

  def beat(self, step: int | None = None):
    self._last, self._step = self._time(), step

  def stop(self):
    self._stop.set()

  def _watch(self):
    while not self._stop.wait(min(1.0, self.timeout_s / 4)):
      if self._last is None:
        continue
      idle = self._time() - self._last
      if idle > self.timeout_s:
        sys.stderr.write(
            f"racer_jax: {self.what} made no progress for {idle:.0f} s "
            f"(after step {self._step}) in process {jax.process_index()} "
            f"of {jax.process_count()}: a peer process has probably died "
            "or hangs. Exiting; restart every process with the same "
            "workdir to resume from the last checkpoint.\n")
        sys.stderr.flush()
        os._exit(self.EXIT_STATUS)
