"""Every command the README shows parses: its launcher knows each flag, its
``--config.*`` overrides name real config fields of the right type, and a
required flag is given. (Running them needs trained runs and real data; the
demo command itself is run by ``.ci/run``.)

One interpreter imports what the launchers import, once; each command is
then parsed in a forked child of it (a fresh copy: the launcher defines its
flags there, on a FlagValues no other command touched), so a command costs
a fork, not a Python start with JAX (~4 s each, 53 commands)."""

import json
import re
import shlex
import subprocess
import sys

from tests.conftest import REPO

_PARSE_EACH = r"""
import ast, importlib, io, json, os, runpy, sys, tempfile, traceback
commands = json.loads(sys.stdin.read())
for path in sorted({c[0] for c in commands}):  # what the launchers import
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
for argv in commands:
  with tempfile.TemporaryFile() as err:
    pid = os.fork()
    if pid == 0:
      os.dup2(err.fileno(), 2)
      code = 0
      try:
        from absl import flags
        sys.argv = list(argv)  # config_flags finds --config.* overrides here
        runpy.run_path(argv[0], run_name="readme_check")  # defines flags
        flags.FLAGS(argv)
        flags.FLAGS.validate_all_flags()
        if "config" in flags.FLAGS:
          flags.FLAGS.config  # applies the --config.* overrides
      except BaseException:
        traceback.print_exc()
        code = 1
      sys.stderr.flush()
      os._exit(code)
    _, status = os.waitpid(pid, 0)
    err.seek(0)
    lines = err.read().decode(errors="replace").strip().splitlines()
  results.append([os.waitstatus_to_exitcode(status), lines[-1:]])
print(json.dumps(results))
"""

_LAUNCHERS = "evaluate|train|soup|curriculum|benchmark|compare|answer|prepare|main"


def readme_commands() -> list[str]:
  """The README's ``python launch/X.py ...`` lines (continuations joined) and
  its shortened ``X.py ...`` commands in backticks (the results table)."""
  text = (REPO / "README.md").read_text().replace("\\\n", " ")
  commands = []
  for line in text.splitlines():
    found = re.search(r"python (launch/\S+\.py.*)", line)
    if found and line.startswith("    "):
      commands.append(found.group(1).split("  #")[0].strip())
  for found in re.finditer(rf"`((?:{_LAUNCHERS})\.py [^`]*)`", text):
    commands.append("launch/" + found.group(1))
  return commands


def parse_each(commands: list[str]) -> list[tuple[int, list[str]]]:
  """Per command: (exit code, the last line of its error output)."""
  out = subprocess.run([sys.executable, "-c", _PARSE_EACH],
                       input=json.dumps([shlex.split(c) for c in commands]),
                       capture_output=True, text=True, cwd=REPO, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  return [tuple(r) for r in json.loads(out.stdout.strip().splitlines()[-1])]


def test_the_readme_shows_commands_for_every_launcher():
  shown = {shlex.split(c)[0] for c in readme_commands()}
  launchers = {f"launch/{p.name}" for p in (REPO / "launch").glob("*.py")}
  assert launchers <= shown, launchers - shown


def test_readme_commands_parse():  # one Python start, a fork per command
  commands = readme_commands()
  results = parse_each(commands)
  failed = {c: lines for c, (code, lines) in zip(commands, results) if code}
  assert len(results) == len(commands) and not failed, failed


def test_a_bad_command_fails_its_parse():
  """The forked parse is not lenient: an unknown flag, a config field that
  does not exist and a missing required flag each fail, in any order
  between good commands."""
  good = "launch/evaluate.py --workdir=RUN"
  bad = ["launch/evaluate.py --workdir=RUN --no_such_flag=1",
         "launch/train.py --config=configs/demo.py --workdir=W "
         "--config.no_such_field=1",
         "launch/train.py --config=configs/demo.py"]
  codes = [code for code, _ in parse_each([good] + bad + [good])]
  assert codes == [0, 1, 1, 1, 0], codes
