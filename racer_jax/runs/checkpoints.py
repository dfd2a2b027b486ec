"""Orbax checkpoints of the train state plus a JSON record.

Restoring uses abstract targets built from a freshly initialized state, so
optax states come back with their own types. If the newest checkpoint cannot
be read (a crash mid-write, a corrupt file) the previous one is used and
the fallback is reported; when the resumed run reaches that step again,
the unreadable copy is moved aside to ``<directory>.corrupt/<step>-<time>``
(kept for inspection) before the new one is written. If no checkpoint can
be read at all, restoring raises instead of silently starting over, saying
why: the saved tree does not match the run's (a changed config: model or
memory shapes), or the files are damaged or incomplete.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import jax
import orbax.checkpoint as ocp

from racer_jax.errors import CheckpointError, tracebacks_wanted


def restore_template(create: Callable, *args, **kwargs):
  """``create(*args, **kwargs)`` -> ``(..., state)`` with the state's arrays
  as ``jax.ShapeDtypeStruct`` s: the restore target of a run, built by
  tracing alone (no parameter initialization runs, which for MiniLM takes
  seconds). The other items (model, optimizer) are returned as built."""
  rest = []

  def state_only():
    *others, state = create(*args, **kwargs)
    rest[:] = others
    return state

  state = jax.eval_shape(state_only)
  return (*rest, state)


class Checkpointer:
  """``save(step, state, record)`` / ``restore_latest(template)``."""

  def __init__(self, directory, max_to_keep: int = 3):
    self.directory = Path(directory).resolve()
    _check_writable(self.directory)
    _quiet_orbax_error_logs()
    self.manager = ocp.CheckpointManager(
        self.directory, options=ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True))

  def save(self, step: int, state, record: dict) -> None:
    if step in self.manager.all_steps():  # an unreadable leftover
      self._move_aside(step)
    try:
      self.manager.save(step, args=ocp.args.Composite(
          state=ocp.args.StandardSave(state),
          record=ocp.args.JsonSave(record)))
      self.manager.wait_until_finished()
    except Exception as e:  # noqa: BLE001 - a full disk, a lost mount...
      raise CheckpointError(f"could not save checkpoint {step} in "
                            f"{self.directory}: {type(e).__name__}: "
                            f"{str(e)[:200]}") from e

  def all_steps(self) -> list[int]:
    return sorted(self.manager.all_steps())

  def restore(self, step: int, template) -> tuple[Any, dict]:
    abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, template)
    out = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract),
        record=ocp.args.JsonRestore()))
    return out.state, dict(out.record or {})

  def record(self, step: int) -> dict:
    """The JSON record saved with ``step`` (no arrays restored)."""
    out = self.manager.restore(step, args=ocp.args.Composite(
        record=ocp.args.JsonRestore()))
    return dict(out.record or {})

  def restore_latest(self, template, step: int | None = None,
                     log: Callable[[str], None] = print
                     ) -> tuple[Any, dict, int] | None:
    """Restores ``step`` (or the newest readable checkpoint).

    Returns ``(state, record, step)`` or None when there is no checkpoint.
    """
    # Before the first read, not after a failure: a failed read's stragglers
    # complete on tensorstore's threads at any moment from then on.
    _quiet_failed_read_stragglers()
    steps = self.all_steps()
    if step is not None:
      if step not in steps:
        raise FileNotFoundError(f"no checkpoint for step {step} in "
                                f"{self.directory} (have {steps})")
      state, record = self.restore(step, template)
      return state, record, step
    errors = []
    for candidate in reversed(steps):
      try:
        state, record = self.restore(candidate, template)
      except Exception as e:  # noqa: BLE001 - any unreadable checkpoint
        errors.append(f"{candidate}: {type(e).__name__}: {str(e)[:300]}")
        log(f"checkpoint {candidate} in {self.directory} is unreadable "
            f"({type(e).__name__}: {str(e)[:200]}); falling back to an "
            "older one")
        continue
      return state, record, candidate
    if errors:
      mismatched = [e for e in errors if _is_mismatch(e)]
      why = ("the saved model does not match this config (model or memory "
             "shapes changed): use a new workdir or the run's own config"
             if len(mismatched) == len(errors) else
             "the files are damaged or incomplete (a crash or a full disk "
             "mid-write?): move them aside or use a new workdir")
      raise CheckpointError(
          f"none of the {len(steps)} checkpoints in {self.directory} could "
          f"be restored: {why}. Errors: " + "; ".join(errors))
    return None

  def _move_aside(self, step: int) -> Path:
    """Moves an unreadable step out of the manager's directory."""
    src = self.directory / str(step)
    dst = self.directory.with_name(self.directory.name + ".corrupt") / (
        f"{step}-{time.strftime('%Y%m%d-%H%M%S')}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.exists():
      shutil.move(str(src), str(dst))
    self.manager.reload()
    return dst

  def close(self) -> None:
    self.manager.close()


def _check_writable(directory: Path) -> None:
  """Checks at start that checkpoints can be written to ``directory`` (a
  folder, or one that can be made), rather than at the first save."""
  if directory.exists() and not directory.is_dir():
    raise CheckpointError(f"{directory} is a file, not a folder: "
                          "checkpoints cannot be saved there")
  try:
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".write_test.{os.getpid()}"
    probe.write_bytes(b"")
    probe.unlink()
  except OSError as e:
    raise CheckpointError(f"checkpoints cannot be written to {directory}: "
                          f"{e.strerror or e}") from None


def restore_run(workdir, template, what: str = "", step: int | None = None,
                log: Callable[[str], None] = print) -> tuple[Any, dict, int]:
  """``(state, record, step)`` of a trained run's ``<workdir>/checkpoints``.

  ``step`` None takes the newest readable checkpoint. ``what`` names the run
  in the error ("refiner", "answer", ...) when there is no checkpoint.
  """
  folder = Path(workdir) / "checkpoints"
  ckpt = Checkpointer(folder)
  try:
    restored = ckpt.restore_latest(template, step=step, log=log)
  finally:
    ckpt.close()
  if restored is None:
    kind = f"{what} " if what else ""
    raise FileNotFoundError(f"no {kind}checkpoint in {folder}: run "
                            "launch/train.py first")
  return restored


class _OrbaxErrors(logging.Filter):
  """Drops orbax's own ERROR logs (tracebacks from its worker threads):
  every failure they describe reaches the caller as one CheckpointError."""

  def filter(self, record) -> bool:
    return not (record.levelno >= logging.ERROR and
                f"{os.sep}orbax{os.sep}" in (record.pathname or ""))


def _quiet_orbax_error_logs() -> None:
  if tracebacks_wanted():
    return
  logger = logging.getLogger("absl")
  if not any(isinstance(f, _OrbaxErrors) for f in logger.filters):
    logger.addFilter(_OrbaxErrors())


def _is_mismatch(error: str) -> bool:
  """Whether a restore error says the saved tree differs from the
  template's (a config change), rather than that files are unreadable."""
  text = error.lower()
  return any(k in text for k in ("tree structures do not match",
                                 "structure mismatch", "shape mismatch",
                                 "shapes do not match", "incompatible shape",
                                 "is not compatible with the stored shape",
                                 "dtype mismatch"))


def _is_closed_loop_callback(unraisable) -> bool:
  return (isinstance(unraisable.exc_value, RuntimeError)
          and str(unraisable.exc_value) == "Event loop is closed")


class _UnretrievedReadErrors(logging.Filter):
  """Drops asyncio's "Future (or Task) exception was never retrieved" for
  a tensorstore read error: once one array of a checkpoint fails, orbax
  stops awaiting the others, and those that fail too are logged at
  collection, as a future or as a task depending on where they were."""

  def filter(self, record) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    head = str(record.msg).partition("\n")[0]
    return not (head.endswith(" exception was never retrieved")
                and exc is not None and "tensorstore_spec" in str(exc))


def _quiet_failed_read_stragglers() -> None:
  """A restore that fails leaves reads in flight. Each that completes later
  prints a traceback though the checkpoint is reported unreadable once:

  - into orbax's event loop, already closed by the failure: "Event loop is
    closed" through ``sys.unraisablehook``;
  - into a future or task nobody awaits any more: asyncio's "Future (Task)
    exception was never retrieved" log.

  Drops exactly those (installed before the first read: the stragglers come
  at any moment); every other unraisable exception and asyncio log passes.
  ``RACER_TRACEBACK=1`` keeps them all.
  """
  if tracebacks_wanted():
    return
  logger = logging.getLogger("asyncio")
  if not any(isinstance(f, _UnretrievedReadErrors) for f in logger.filters):
    logger.addFilter(_UnretrievedReadErrors())
  previous = sys.unraisablehook
  if getattr(previous, "_racer_quiet", False):
    return

  def hook(unraisable):
    if not _is_closed_loop_callback(unraisable):
      previous(unraisable)
  hook._racer_quiet = True
  sys.unraisablehook = hook
