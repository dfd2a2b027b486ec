"""Importing a launcher must not start JAX's XLA backend.

jax.distributed.initialize() (multi-process runs) refuses to run once any
backend exists, so a module on the launchers' import path that runs a jax
op at import time (bm25s does, for one) breaks every multi-process launch.
This checks each launcher in a fresh interpreter, in seconds, where the
multi-process tests take minutes and run only with --runslow."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

LAUNCHERS = sorted(p.name for p in (REPO / "launch").glob("*.py"))

_PROBE = """
import importlib.util, sys
from jax._src import xla_bridge
path = sys.argv[1]
spec = importlib.util.spec_from_file_location("launcher", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
started = sorted(xla_bridge._backends)
print("started:", started)
sys.exit(1 if started else 0)
"""


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_importing_a_launcher_starts_no_backend(launcher):
  probe = subprocess.run(
      [sys.executable, "-c", _PROBE, str(REPO / "launch" / launcher)],
      cwd=REPO, capture_output=True, text=True, timeout=300)
  assert probe.returncode == 0, (probe.stdout + probe.stderr)[-3000:]
