"""The host loop shared by every training run: call the jitted update,
average and log metrics, stop on a non-finite step, evaluate now and then,
checkpoint."""

from __future__ import annotations

import json
import time
from typing import Callable

import jax
import numpy as np
import tqdm

from racer_jax.runs import distributed
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.metric_writer import MetricWriter


def run_updates(state, update: Callable, *, start: int, end: int, total: int,
                ckpt: Checkpointer, writer: MetricWriter, log_every: int,
                checkpoint_every: int, record: Callable[[int], dict],
                evaluate: Callable | None = None, eval_every: int = 0,
                progress: bool = True, desc: str = "train",
                stall_timeout_s: float | None = None) -> tuple:
  """Runs updates ``start .. end - 1`` of a run of ``total`` updates.

  Args:
    update: ``update(state, step) -> (state, metrics)``; metrics include a
      ``finite`` flag (0 when the jitted NaN guard skipped the step).
    record: JSON record saved with the checkpoint of a step.
    evaluate: ``evaluate(state, step) -> dict`` of figures, every
      ``eval_every`` updates and at the end.
    stall_timeout_s: in a multi-process run, exit with a clear error when
      no update completes for this long (a dead peer); default: off on one
      process, 600 s on several.

  Returns:
    ``(state, last logged metrics)``.

  Raises:
    FloatingPointError: a step was non-finite (names the step and the last
      checkpoint).
  """
  pending, last, t0 = [], {}, time.perf_counter()
  progress = progress and jax.process_index() == 0
  if stall_timeout_s is None and jax.process_count() > 1:
    stall_timeout_s = 600.0
  watchdog = (distributed.StallWatchdog(stall_timeout_s, desc).start()
              if stall_timeout_s else None)
  try:
    for step in tqdm.trange(start, end, desc=desc, disable=not progress,
                            initial=start, total=total):
      state, metrics = update(state, step)
      if watchdog is not None:
        watchdog.beat(step)
      pending.append(metrics)
      done = step + 1
      if done % log_every == 0 or done == total:
        rows = distributed.to_host(pending)
        pending = []
        flags = [float(r["finite"]) for r in rows]
        if min(flags) < 1:
          bad = done - len(rows) + flags.index(0.0)
          raise FloatingPointError(
              f"non-finite loss or gradient at step {bad} (the update was "
              f"skipped, parameters are intact); last checkpoint: "
              f"{ckpt.all_steps()[-1:] or 'none'} in {ckpt.directory}. "
              "Lower the learning rate or check the inputs.")
        last = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
        last["steps_per_second"] = len(rows) / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        writer.write(done, last, prefix="train/")
      if evaluate is not None and eval_every and (
          done % eval_every == 0 or done == total):
        figures = evaluate(state, done)
        writer.write(done, {k: v for k, v in figures.items()
                            if isinstance(v, float)}, prefix="eval/")
        last.update({"eval_" + k: v for k, v in figures.items()})
      if done % checkpoint_every == 0 or done == total:
        # one process: a host copy; several: the global arrays, which orbax
        # writes once across processes
        one = jax.process_count() == 1
        ckpt.save(done, distributed.to_host(state) if one else state,
                  record(done))
    return state, last
  finally:
    if watchdog is not None:
      watchdog.stop()


def run_stage_updates(state, update: Callable, *, config, workdir,
                      ckpt: Checkpointer, start: int, total: int,
                      stop_after: int | None, record: Callable[[int], dict],
                      evaluate: Callable | None = None, eval_every: int = 0,
                      progress: bool = True, desc: str = "train",
                      stall_timeout_s: float | None = None) -> tuple:
  """A training stage's :func:`run_updates` from ``start`` to ``total``
  (or ``stop_after`` updates), logging to ``workdir`` at
  ``config.train``'s intervals; every checkpoint's record is ``{"step",
  **record(step), "config"}``. Closes the writer and ``ckpt`` (an error
  included: the saves in flight finish). Returns ``(state, last logged
  metrics, finished)``."""
  t = config.train
  end = total if stop_after is None else min(total, start + stop_after)
  saved_config = json.loads(config.to_json())
  writer = MetricWriter(workdir, enabled=jax.process_index() == 0,
                        start_step=start)
  try:
    state, last = run_updates(
        state, update, start=start, end=end, total=total, ckpt=ckpt,
        writer=writer, log_every=t.log_every,
        checkpoint_every=t.checkpoint_every,
        record=lambda done: {"step": done, **record(done),
                             "config": saved_config},
        evaluate=evaluate, eval_every=eval_every, progress=progress,
        desc=desc, stall_timeout_s=stall_timeout_s)
  finally:
    writer.close()
    ckpt.close()
  return state, last, end == total

