"""Every command the README shows parses: its launcher knows each flag, its
``--config.*`` overrides name real config fields of the right type, and a
required flag is given. (Running them needs trained runs and real data; the
demo command itself is run by ``.ci/run``.)"""

import re
import shlex
import subprocess
import sys

import pytest

from tests.conftest import REPO

_PARSE_ONLY = r"""
import runpy, sys
from absl import flags
argv = sys.argv[1:]
runpy.run_path(argv[0], run_name="readme_check")  # defines flags, runs nothing
flags.FLAGS(argv)
flags.FLAGS.validate_all_flags()
if "config" in flags.FLAGS:
  flags.FLAGS.config  # applies the --config.* overrides
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


def test_the_readme_shows_commands_for_every_launcher():
  shown = {shlex.split(c)[0] for c in readme_commands()}
  launchers = {f"launch/{p.name}" for p in (REPO / "launch").glob("*.py")}
  assert launchers <= shown, launchers - shown


@pytest.mark.slow  # a process per command, ~4 s each
@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_parses(command):
  out = subprocess.run([sys.executable, "-c", _PARSE_ONLY,
                        *shlex.split(command)], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
  assert out.returncode == 0, out.stderr.strip().splitlines()[-1:]
