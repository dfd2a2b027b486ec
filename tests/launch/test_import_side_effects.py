"""Importing a launcher must not start JAX's XLA backend.

jax.distributed.initialize() (multi-process runs) refuses to run once any
backend exists, so a module on the launchers' import path that runs a jax
op at import time (bm25s does, for one) breaks every multi-process launch.
Checked here in seconds; the multi-process tests take minutes and run only
with --runslow."""

from tests.conftest import REPO
from tests.launcher_probe import run_forked

LAUNCHERS = sorted(f"launch/{p.name}" for p in (REPO / "launch").glob("*.py"))

_CHECK = """\
        from jax._src import xla_bridge
        assert not xla_bridge._backends, "imports started XLA"
        runpy.run_path(job[0], run_name="import_check")
        started = sorted(xla_bridge._backends)
        assert not started, f"{job[0]} started XLA ({started})\""""


def test_importing_a_launcher_starts_no_backend():
  results = run_forked(_CHECK, [[path] for path in LAUNCHERS])
  failed = {p: lines for p, (code, lines) in zip(LAUNCHERS, results) if code}
  assert len(results) == len(LAUNCHERS) and not failed, failed
