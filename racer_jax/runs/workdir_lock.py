"""One process at a time in a run folder.

``with hold(folder):`` takes an exclusive ``fcntl.flock`` on
``<folder>/.lock.p<process index>``: a second process on the same folder is
refused at once with a :class:`~racer_jax.errors.ConfigError` naming the
holder (pid, host, since when). The kernel releases the lock when its
holder exits, however it ends (``kill -9`` included), so a dead run never
leaves the folder stuck. The processes of one multi-process job hold
different indices and so run together.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path

from racer_jax.errors import ConfigError


@contextlib.contextmanager
def hold(folder, process_index: int = 0, what: str = "run folder"):
  folder = Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  path = folder / f".lock.p{process_index}"
  handle = open(path, "a+", encoding="utf-8")
  try:
    try:
      fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      handle.seek(0)
      holder = handle.read().strip() or "another process"
      raise ConfigError(f"{folder} is in use by {holder}: one process per "
                        f"{what} (wait for it, stop it, or use another "
                        "folder)") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()} since "
                 f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    handle.flush()
    yield
  finally:
    handle.close()  # closing releases the lock
