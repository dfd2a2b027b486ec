"""The shape of the code a newcomer relies on: thin entry points, short
modules, imports at the top (lint-imports checks their direction)."""

import ast
import subprocess
import sys

import pytest

from tests.conftest import REPO

# Imported where used: optional or heavy, so the package imports without them.
# imported where used: optional, heavy, or (bm25s) running a jax op at
# import, which would start XLA before jax.distributed.initialize()
OPTIONAL = ("torch", "matplotlib", "google", "safetensors", "tokenizers",
            "tensorboardX", "rouge_score", "bm25s", "tunix", "gguf",
            "llama_cpp", "jinja2")
MODULES = sorted((REPO / "racer_jax").rglob("*.py"))
LAUNCHERS = sorted((REPO / "launch").glob("*.py"))


@pytest.mark.parametrize("path", LAUNCHERS, ids=lambda p: p.name)
def test_launchers_are_flags_and_one_call(path):
  text = path.read_text()
  assert "sys.path" not in text, path
  assert len(text.splitlines()) <= 80, path
  assert "entry_point.run(main" in text, path


def test_modules_stay_under_400_lines():
  long = {str(p.relative_to(REPO)): n for p in MODULES
          if (n := len(p.read_text().splitlines())) > 400}
  assert not long, long


def test_imports_are_at_the_top():
  inside = []
  for path in MODULES + LAUNCHERS:
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for inner in ast.walk(node):
          if isinstance(inner, ast.ImportFrom):
            names = [inner.module or ""]
          elif isinstance(inner, ast.Import):
            names = [a.name for a in inner.names]
          else:
            continue
          inside += [f"{path.relative_to(REPO)}:{inner.lineno} {n}"
                     for n in names if not n.startswith(OPTIONAL)]
  assert not inside, inside


def test_module_names_are_unique():
  names = {}
  for path in MODULES:
    if path.name != "__init__.py":
      names.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
  assert not {k: v for k, v in names.items() if len(v) > 1}


def test_the_package_imports_without_the_lm_extra():
  """The main job and every launcher's library import with the ``lm``
  extra's packages (tunix, gguf, jinja2) and llama.cpp absent: the LM
  loads them only when a model is loaded."""
  code = ("import sys\n"
          "for m in ('tunix', 'gguf', 'jinja2', 'llama_cpp'):\n"
          "  sys.modules[m] = None\n"
          "import racer_jax.train.main_job, racer_jax.eval.evaluate_run\n"
          "import racer_jax.agents.stack, racer_jax.bench.lm_score_bench\n")
  done = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                        capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-2000:]
