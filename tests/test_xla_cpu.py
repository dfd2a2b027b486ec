"""racer_jax.xla_cpu: when an entry point asks XLA for the memory-minimizing
schedule and 512-bit vectors (and that importing racer_jax never does)."""

import os
import subprocess
import sys

from racer_jax import xla_cpu
from tests.conftest import REPO

AVX512 = {"sse2", "avx2", "avx512f"}


SCHEDULE = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def test_adds_the_vector_width_only_on_avx512():
  assert xla_cpu.default_flags({}, AVX512) == (
      f"{SCHEDULE} --xla_cpu_prefer_vector_width=512")
  assert xla_cpu.default_flags({}, {"sse2", "avx2"}) == SCHEDULE
  assert xla_cpu.default_flags({}, set()) == SCHEDULE


def test_keeps_the_users_flags():
  env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
  assert xla_cpu.default_flags(env, AVX512) == (
      f"--xla_force_host_platform_device_count=8 {SCHEDULE} "
      "--xla_cpu_prefer_vector_width=512")
  # What the user chose wins, and the switch turns the defaults off.
  chosen = {"XLA_FLAGS": "--xla_cpu_prefer_vector_width=256 "
            "--xla_cpu_enable_concurrency_optimized_scheduler=true"}
  assert xla_cpu.default_flags(chosen, AVX512) is None
  assert xla_cpu.default_flags({"RACER_XLA_CPU_DEFAULTS": "0"},
                               AVX512) is None


def test_reads_cpu_flags(tmp_path):
  info = tmp_path / "cpuinfo"
  info.write_text("processor\t: 0\nmodel name\t: Some CPU\n"
                  "flags\t\t: fpu sse2 avx2 avx512f\n\nprocessor\t: 1\n"
                  "flags\t\t: fpu\n")
  assert xla_cpu.cpu_flags(str(info)) == {"fpu", "sse2", "avx2", "avx512f"}
  assert xla_cpu.cpu_flags(str(tmp_path / "missing")) == set()


def _run(code: str, env: dict) -> list[str]:
  return subprocess.run([sys.executable, "-c", code], capture_output=True,
                        text=True, check=True, cwd=REPO, env=env
                        ).stdout.split("\n")


def _clean_env(**extra) -> dict:
  env = {k: v for k, v in os.environ.items()
         if k not in ("XLA_FLAGS", "RACER_XLA_CPU_DEFAULTS")}
  return {**env, **extra}


def test_importing_racer_jax_changes_nothing():
  """Every module of the package imports without touching XLA_FLAGS."""
  code = ("import importlib, os, pkgutil, racer_jax\n"
          "for m in pkgutil.walk_packages(racer_jax.__path__, 'racer_jax.'):\n"
          "  importlib.import_module(m.name)\n"
          "print(os.environ.get('XLA_FLAGS'))")
  assert _run(code, _clean_env())[0] == "None"
  mine = "--xla_force_host_platform_device_count=2"
  assert _run(code, _clean_env(XLA_FLAGS=mine))[0] == mine


def test_entry_points_apply_the_defaults_before_jax_starts():
  """entry_point.run applies them before main runs; the user's flags still
  reach XLA."""
  code = ("import os, sys, jax\n"
          "from racer_jax import entry_point\n"
          "def main():\n"
          "  print(os.environ['XLA_FLAGS']); print(jax.device_count())\n"
          "sys.argv = ['prog']\n"
          "entry_point.run(main)")
  env = _clean_env(XLA_FLAGS="--xla_force_host_platform_device_count=3")
  flags, devices = _run(code, env)[:2]
  assert devices == "3"
  expect = f"--xla_force_host_platform_device_count=3 {SCHEDULE}"
  if "avx512f" in xla_cpu.cpu_flags():
    expect += " --xla_cpu_prefer_vector_width=512"
  assert flags == expect
