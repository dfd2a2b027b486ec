"""One evaluation at a time per evaluation folder.

Two evaluations writing one folder (the same run, split and setup) would
interleave their per-question files and overwrite each other's figures.
:func:`held` takes an exclusive ``flock`` on ``<folder>/.lock`` for the
evaluation's length, without waiting: a second evaluation is refused in one
line naming the folder and the process holding it. The lock goes with the
process (a crash leaves none behind).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from racer_jax.errors import ConfigError


@contextlib.contextmanager
def held(folder):
  """Holds ``folder``'s lock inside the ``with``; ConfigError if another
  evaluation holds it."""
  path = Path(folder) / ".lock"
  f = open(path, "a+")
  try:
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    f.seek(0)
    holder = f.read().strip() or "another process"
    f.close()
    raise ConfigError(f"{folder}: another evaluation is writing this folder "
                      f"({holder}); wait for it to finish") from None
  try:
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    f.flush()
    yield path
  finally:
    fcntl.flock(f, fcntl.LOCK_UN)
    f.close()
