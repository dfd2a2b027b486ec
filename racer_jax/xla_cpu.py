"""XLA's CPU code generation: 512-bit vectors where the CPU has AVX-512.

XLA emits 256-bit vector code on x86 even when the CPU has AVX-512 (older
Intel cores lowered their clock for 512-bit instructions). The walker's
rollout and update are many small fused loops and matmuls; with 512-bit
vectors the jitted rollout at 4096 walkers ran about 8% faster on this
project's 2-core AVX-512 machines (AMD EPYC, interleaved A/B in one
process, 250 rounds each; ``launch/benchmark.py rollout`` records the
flags it ran with).

:func:`apply_defaults` adds ``--xla_cpu_prefer_vector_width=512`` to
``XLA_FLAGS`` when ``/proc/cpuinfo`` lists ``avx512f``, unless
``XLA_FLAGS`` already names a vector width or ``RACER_XLA_CPU_DEFAULTS=0``.
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
  if (environ.get("RACER_XLA_CPU_DEFAULTS", "1") == "0"
      or VECTOR_WIDTH_FLAG in current or "avx512f" not in features):
    return None
  return f"{current} {VECTOR_WIDTH_FLAG}=512".strip()


def apply_defaults(environ=os.environ) -> None:
  """Sets :func:`default_flags` in ``environ`` (see the module docstring)."""
  flags = default_flags(environ, cpu_flags())
  if flags is not None:
    environ["XLA_FLAGS"] = flags
