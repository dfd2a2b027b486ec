"""XLA's CPU code generation: a memory-minimizing schedule, and 512-bit
vectors where the CPU has AVX-512.

XLA's CPU compiler schedules for concurrency by default, which keeps many
buffers alive at once and defeats rematerialization: the gradient of
SmolLM2's 30 layers over 2 x 512 tokens needed 2.9 GB of temporaries with
every layer rematerialized, 0.06 GB with the memory-minimizing schedule
(``--xla_cpu_enable_concurrency_optimized_scheduler=false``; an SFT step
of 2 x 1024 tokens: 16.2 GB peak -> 7.0 GB, and no slower on 2 cores).

XLA emits 256-bit vector code on x86 even when the CPU has AVX-512 (older
Intel cores lowered their clock for 512-bit instructions). The walker's
rollout and update are many small fused loops and matmuls; with 512-bit
vectors the jitted rollout at 4096 walkers ran about 8% faster on this
project's 2-core AVX-512 machines (AMD EPYC, interleaved A/B in one
process, 250 rounds each; ``launch/benchmark.py rollout`` records the
flags it ran with).

:func:`apply_defaults` adds the scheduler flag to ``XLA_FLAGS``, and
``--xla_cpu_prefer_vector_width=512`` when ``/proc/cpuinfo`` lists
``avx512f``, each unless ``XLA_FLAGS`` already names it; neither with
``RACER_XLA_CPU_DEFAULTS=0``.
XLA reads the variable when jax creates its CPU client (the first
computation), so the entry points call this first
(:func:`racer_jax.entry_point.run`); importing racer_jax never does. A
program that imports racer_jax as a library keeps the flags it set.
Floating-point results may differ from 256-bit code in the last bits (sums
are reassociated), so sampled walks can differ between the two settings.
"""

from __future__ import annotations

import os

VECTOR_WIDTH_FLAG = "--xla_cpu_prefer_vector_width"
SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
  """The first CPU's feature flags (empty where ``path`` is unreadable)."""
  try:
    with open(path, encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
          return set(value.split())
  except OSError:
    pass
  return set()


def default_flags(environ, features: set[str]) -> str | None:
  """The ``XLA_FLAGS`` value to set, or None to leave ``environ`` as is."""
  current = environ.get("XLA_FLAGS", "")
  if environ.get("RACER_XLA_CPU_DEFAULTS", "1") == "0":
    return None
  flags = current
  if SCHEDULER_FLAG not in current:
    flags = f"{flags} {SCHEDULER_FLAG}=false"
  if VECTOR_WIDTH_FLAG not in current and "avx512f" in features:
    flags = f"{flags} {VECTOR_WIDTH_FLAG}=512"
  return None if flags == current else flags.strip()


def apply_defaults(environ=os.environ) -> None:
  """Sets :func:`default_flags` in ``environ`` (see the module docstring)."""
  flags = default_flags(environ, cpu_flags())
  if flags is not None:
    environ["XLA_FLAGS"] = flags
