"""Metric logging: a JSONL file (always) and TensorBoard event files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np


class MetricWriter:
  """Appends ``{"step": s, **scalars}`` lines to ``metrics.jsonl`` and the
  same scalars to TensorBoard event files under ``tensorboard/``."""

  def __init__(self, workdir, enabled: bool = True, tensorboard: bool = True):
    self.enabled = enabled
    self.path = Path(workdir) / "metrics.jsonl"
    self._tb = None
    if enabled and tensorboard:
      from tensorboardX import SummaryWriter
      self._tb = SummaryWriter(str(Path(workdir) / "tensorboard"))

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


def read_metrics(workdir) -> list[dict]:
  """The JSONL log as a list of dicts (a torn last line is ignored)."""
  path = Path(workdir) / "metrics.jsonl"
  if not path.exists():
    return []
  rows = []
  for line in path.read_text(encoding="utf-8").splitlines():
    try:
      rows.append(json.loads(line))
    except json.JSONDecodeError:
      continue
  return rows
