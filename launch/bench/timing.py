"""How every benchmark times, and what it records about the machine.

Timings are wall times after one warm-up call (compiled programs reach
their steady speed, eager references fill their caches); the best is the
headline, the median says how much the run varied.
"""

from __future__ import annotations

import resource
import time
from statistics import median
from typing import Callable

from racer_jax.machine import describe


def times(fn: Callable[[], object], repeats: int) -> list[float]:
  """Wall times in seconds of ``fn()`` over ``repeats`` runs after one
  warm-up."""
  fn()
  out = []
  for _ in range(max(repeats, 1)):
    t0 = time.perf_counter()
    fn()
    out.append(time.perf_counter() - t0)
  return out


def best(fn: Callable[[], object], repeats: int) -> float:
  """Best wall time of ``fn()`` over ``repeats`` runs after one warm-up."""
  return min(times(fn, repeats))


def timed(row: dict, name: str, fn: Callable[[], object],
          repeats: int) -> None:
  """``row[name + "_s"]``: the best time; ``row[name + "_median_s"]``: the
  median (eager references vary more from run to run than the compiled
  program, so the ratios of medians are reported beside the best)."""
  t = times(fn, repeats)
  row[name + "_s"], row[name + "_median_s"] = min(t), median(t)


def peak_rss_gb() -> float:
  """The process's peak resident memory so far, GiB (Linux ``ru_maxrss``
  is in KiB)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def machine() -> dict:
  """What the ratios depend on (:func:`racer_jax.machine.describe`: CPU
  model, vector extension, library versions, the XLA flags in force; eager
  PyTorch gains more than XLA from AVX-512) and PyTorch's version where it
  is installed."""
  out = describe()
  try:
    import torch
    out["torch_version"] = torch.__version__
  except ImportError:
    pass
  return out


def rounded(tree):
  """``tree`` with floats at 4 decimals (4 significant digits below 1), for
  the benchmarks' JSON line."""
  if isinstance(tree, dict):
    return {k: rounded(v) for k, v in tree.items()}
  if isinstance(tree, list):
    return [rounded(v) for v in tree]
  if isinstance(tree, float):
    return round(tree, 4) if abs(tree) >= 1 else float(f"{tree:.4g}")
  return tree
