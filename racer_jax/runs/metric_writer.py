"""Metric logging: a JSONL file (always) and TensorBoard event files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np


class MetricWriter:
  """Appends ``{"step": s, **scalars}`` lines to ``metrics.jsonl`` and the
  same scalars to TensorBoard event files under ``tensorboard/``.

  ``start_step``: the step the run (re)starts from. Rows logged past it by
  an earlier, stopped process (steps the resumed run will log again) are
  dropped from the JSONL at once and purged from TensorBoard's view, so a
  resumed run's log has each step once."""

  def __init__(self, workdir, enabled: bool = True, tensorboard: bool = True,
               start_step: int = 0):
    self.enabled = enabled
    self.path = Path(workdir) / "metrics.jsonl"
    self._tb = None
    if enabled and self.path.exists():
      _keep_through(self.path, start_step)
    if enabled and tensorboard:
      from tensorboardX import SummaryWriter
      self._tb = SummaryWriter(str(Path(workdir) / "tensorboard"),
                               purge_step=start_step + 1)

  def write(self, step: int, scalars: dict, prefix: str = "") -> None:
    if not self.enabled:
      return
    clean = {prefix + k: float(np.asarray(v)) for k, v in scalars.items()}
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(json.dumps({"step": int(step), **clean}) + "\n")
      f.flush()
      os.fsync(f.fileno())
    if self._tb is not None:
      for k, v in clean.items():
        self._tb.add_scalar(k, v, int(step))
      self._tb.flush()

  def close(self) -> None:
    if self._tb is not None:
      self._tb.close()


def _keep_through(path: Path, step: int) -> None:
  """Rewrites the JSONL log with its rows up to ``step`` (atomically)."""
  kept = [r for r in _rows(path) if int(r.get("step", 0)) <= step]
  tmp = path.with_name(path.name + ".tmp")
  with open(tmp, "w", encoding="utf-8") as f:
    f.write("".join(json.dumps(r) + "\n" for r in kept))
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def _rows(path: Path) -> list[dict]:
  rows = []
  for line in path.read_text(encoding="utf-8").splitlines():
    try:
      rows.append(json.loads(line))
    except json.JSONDecodeError:
      continue
  return rows


def read_metrics(workdir) -> list[dict]:
  """The JSONL log as a list of dicts (a torn last line is ignored)."""
  path = Path(workdir) / "metrics.jsonl"
  return _rows(path) if path.exists() else []
