"""Every command the README shows parses: its launcher knows each flag, its
``--config.*`` overrides name real config fields of the right type, and a
required flag is given. (Running them needs trained runs and real data; the
demo command itself is run by ``.ci/run``.)

Each command is parsed in a forked child of one interpreter that imported
what the launchers import (:mod:`tests.launcher_probe`): a fork per
command, not a Python start with JAX (~4 s each, 50 commands)."""

import re
import shlex

from tests.conftest import REPO
from tests.launcher_probe import run_forked

_PARSE = """\
        from absl import flags
        sys.argv = list(job)  # config_flags finds --config.* overrides here
        runpy.run_path(job[0], run_name="readme_check")  # defines flags
        flags.FLAGS(job)
        flags.FLAGS.validate_all_flags()
        if "config" in flags.FLAGS:
          flags.FLAGS.config  # applies the --config.* overrides"""

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
  return run_forked(_PARSE, [shlex.split(c) for c in commands])


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
