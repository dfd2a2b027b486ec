"""What a run's numbers depend on besides its config: the machine, the
library versions and the XLA flags in force.

The same config and seed give bit-identical runs on one machine, but not
across machines or XLA settings: XLA reassociates sums differently with
256- and 512-bit vector code (:mod:`racer_jax.xla_cpu`), and a training
run amplifies last-bit differences (a sampled walk or a fitted threshold
goes the other way). :func:`record` appends this description to a run's
``environment.jsonl`` whenever training starts or resumes, and the
benchmarks and evaluations report it beside their figures.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import jax
import jaxlib

from racer_jax.xla_cpu import cpu_flags

ENVIRONMENT = "environment.jsonl"


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


def describe() -> dict:
  """CPU model, its widest vector extension, CPU count, the jax and jaxlib
  versions, the XLA flags in force (``XLA_FLAGS``), and the first device's
  kind (this starts jax's backend)."""
  flags = cpu_flags()
  isa = next((x for x in ("avx512f", "avx2", "avx", "sve", "asimd", "neon")
              if x in flags), "unknown")
  return {"cpu_model": cpu_model(), "cpu_vector_isa": isa,
          "cpu_count": os.cpu_count(), "jax_version": jax.__version__,
          "jaxlib_version": jaxlib.__version__,
          "xla_flags": os.environ.get("XLA_FLAGS", ""),
          "device": jax.devices()[0].device_kind,
          "device_count": jax.device_count(),
          "python": platform.python_version()}


def record(workdir, stage: str) -> dict:
  """Appends ``{time, stage, **describe()}`` to
  ``<workdir>/environment.jsonl``; returns the entry."""
  entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "stage": stage,
           **describe()}
  with open(Path(workdir) / ENVIRONMENT, "a", encoding="utf-8") as f:
    f.write(json.dumps(entry) + "\n")
  return entry
