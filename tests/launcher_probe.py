"""Running many launcher checks in one interpreter: the preamble imports
what every given launcher imports (once: JAX, Flax, racer_jax...); each
check then runs in a forked child of it, a fresh copy in which the launcher
defines its flags on a FlagValues no other check touched. A check costs a
fork instead of a Python start with JAX (~3-4 s).

``run_forked(body, jobs)`` runs ``body`` (Python source, indented four
spaces, seeing ``job`` and ``sys``; an exception fails it) once per JSON
``job`` whose ``job[0]`` is a launcher path, and returns per job ``(exit
code, the last ``tail`` lines of its error output)``."""

import json
import subprocess
import sys

from tests.conftest import REPO

_SCRIPT = r"""
import ast, importlib, json, os, runpy, sys, tempfile, traceback
jobs = json.loads(sys.stdin.read())
# as `python launch/X.py` sees it: the launcher's folder first (launch/bench)
sys.path.insert(0, os.path.join(os.getcwd(), "launch"))
for path in sorted({j[0] for j in jobs}):  # what the launchers import
  for node in ast.walk(ast.parse(open(path).read())):
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      module = importlib.import_module(node.module)
      for alias in node.names:  # `from package import submodule`
        if not hasattr(module, alias.name):
          importlib.import_module(f"{node.module}.{alias.name}")
    elif isinstance(node, ast.Import):
      for alias in node.names:
        importlib.import_module(alias.name)
results = []
for job in jobs:
  with tempfile.TemporaryFile() as err:
    pid = os.fork()
    if pid == 0:
      os.dup2(err.fileno(), 2)
      code = 0
      try:
BODY
      except BaseException:
        traceback.print_exc()
        code = 1
      sys.stderr.flush()
      os._exit(code)
    _, status = os.waitpid(pid, 0)
    err.seek(0)
    lines = err.read().decode(errors="replace").strip().splitlines()
  results.append([os.waitstatus_to_exitcode(status), lines[-TAIL:]])
print(json.dumps(results))
"""


def run_forked(body: str, jobs: list, tail: int = 1
               ) -> list[tuple[int, list[str]]]:
  script = _SCRIPT.replace("BODY", body).replace("TAIL", str(int(tail)))
  out = subprocess.run([sys.executable, "-c", script],
                       input=json.dumps(jobs), capture_output=True,
                       text=True, cwd=REPO, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  return [tuple(r) for r in json.loads(out.stdout.strip().splitlines()[-1])]
