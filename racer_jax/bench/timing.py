"""How every benchmark times, and what it records about the machine.

Timings are wall times after one warm-up call (compiled programs reach
their steady speed, eager references fill their caches); the best is the
headline, the median says how much the run varied.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from statistics import median
from typing import Callable

import jax

from racer_jax.xla_cpu import cpu_flags


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


def cpu_model() -> str:
  """The CPU's model name from ``/proc/cpuinfo`` (Linux), else what
  :mod:`platform` says."""
  model = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() == "model name":
          return value.strip()
  except OSError:
    pass
  return model


def machine() -> dict:
  """What the ratios depend on: CPU model, its widest vector extension,
  library versions (eager PyTorch gains more than XLA from AVX-512) and
  the XLA flags in force (``racer_jax.xla_cpu`` adds a 512-bit vector
  width on AVX-512 CPUs)."""
  flags = cpu_flags()
  isa = next((x for x in ("avx512f", "avx2", "avx", "sve", "asimd", "neon")
              if x in flags), "unknown")
  out = {"cpu_model": cpu_model(), "cpu_vector_isa": isa,
         "cpu_count": os.cpu_count(), "jax_version": jax.__version__,
         "xla_flags": os.environ.get("XLA_FLAGS", "")}
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
