"""What every ``launch/`` script does around its ``main``.

``run(main)`` is ``absl.app.run`` plus four things a user should not have
to think about:

* XLA's CPU defaults (:func:`racer_jax.xla_cpu.apply_defaults`) are applied
  before jax starts, here and not on ``import racer_jax``;
* ``--progress=false`` also silences the bars that are not passed it (the
  LLM clients', :func:`racer_jax.errors.bars_off`);
* a stray positional argument, or a flag or config override that cannot be
  parsed (a misspelled ``--config.walker.top_kk``), is refused in one line;
* the user's own mistakes (:class:`~racer_jax.errors.RacerError`, a missing
  file, a bad value) end in one ``error:`` line on stderr and exit status 1,
  not a traceback. ``RACER_TRACEBACK=1`` shows the traceback instead.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from typing import Callable

from absl import app, flags

from racer_jax import xla_cpu
from racer_jax.errors import RacerError, tracebacks_wanted

# What a user's own input can raise: our documented errors, files that are
# not there, values that cannot work.
USER_ERRORS = (RacerError, OSError, ValueError)


def fail(message, status: int = 1) -> None:
  """Ends the program with one ``error:`` line (exit status 1)."""
  text = " ".join(str(message).split()) or type(message).__name__
  print(f"error: {text}", file=sys.stderr, flush=True)
  if any(t.is_alive() and not t.daemon for t in threading.enumerate()
         if t is not threading.main_thread()):
    # A library's worker threads still waiting (orbax's, after a failed
    # save, wait minutes for a signal that never comes): joining them at
    # exit would hang, and every file the run finished is already flushed.
    sys.stdout.flush()
    os._exit(status)
  sys.exit(status)


def parse_flags(argv: list[str], commands: tuple[str, ...] = ()
                ) -> list[str]:
  """absl's flag parsing, its errors (and a config override's) in one line;
  positional arguments are refused (every input is a ``--flag``) except,
  with ``commands``, exactly one of them."""
  try:
    rest = flags.FLAGS(argv)
  except flags.Error as e:
    fail(e)
  except (AttributeError, KeyError, TypeError, ValueError) as e:
    if tracebacks_wanted():
      raise
    inner = e.args[0] if e.args else e
    inner = inner.args[0] if isinstance(inner, KeyError) and inner.args \
        else inner
    fail(f"cannot apply a flag ({type(e).__name__}): {inner} (the config "
         "fields and their types are in configs/default.py)")
  if commands and (len(rest) != 2 or rest[1] not in commands):
    fail(f"usage: {os.path.basename(rest[0])} {'|'.join(commands)} "
         "[--flags]")
  if not commands and len(rest) > 1:
    fail(f"unexpected argument(s) {' '.join(rest[1:])!r}: every input is a "
         "--flag=value")
  return rest


def option(default, help_text: str, choices: tuple[str, ...] = ()):
  """A dataclass field that :func:`define_flags` turns into a flag:
  ``default`` (its type picks the flag's kind: bool, int, float, str or a
  tuple of str for a list), the flag's help and, for a str, its allowed
  values."""
  return dataclasses.field(default=default, metadata={
      "help": help_text, "choices": tuple(choices)})


def define_flags(options_type) -> Callable[[], object]:
  """Defines one absl flag per field of the dataclass ``options_type``
  (see :func:`option`), named as the field; returns a function that builds
  the options from the parsed flags. ``set_flags(options_type)`` lists
  the ones given on the command line."""
  definers = {bool: flags.DEFINE_bool, int: flags.DEFINE_integer,
              float: flags.DEFINE_float, str: flags.DEFINE_string}
  for field in dataclasses.fields(options_type):
    default, meta = field.default, field.metadata
    if meta.get("choices"):
      flags.DEFINE_enum(field.name, default, list(meta["choices"]),
                        meta["help"])
    elif isinstance(default, tuple):
      flags.DEFINE_list(field.name, list(default), meta["help"])
    else:
      definers[type(default)](field.name, default, meta["help"])

  def options():
    values = {}
    for field in dataclasses.fields(options_type):
      value = flags.FLAGS[field.name].value
      values[field.name] = tuple(value) if isinstance(value, list) else value
    return options_type(**values)
  return options


def set_flags(options_type) -> list[str]:
  """The fields of ``options_type`` whose flags the command line set."""
  return [f.name for f in dataclasses.fields(options_type)
          if flags.FLAGS[f.name].present]


def run(main: Callable[..., object], commands: tuple[str, ...] = ()) -> None:
  """Runs ``main()`` as the program; with ``commands``, ``main(command)``
  with the one positional argument, which must be one of them."""

  def wrapped(argv):
    xla_cpu.apply_defaults()
    if "progress" in flags.FLAGS and not flags.FLAGS.progress:
      # the bars that have no progress argument (the LLM clients') read it
      os.environ["TQDM_DISABLE"] = "1"
    try:
      return main(*argv[1:])
    except USER_ERRORS as e:
      if tracebacks_wanted():
        raise
      fail(e)
    except KeyboardInterrupt:
      if tracebacks_wanted():
        raise
      fail("interrupted (Ctrl-C); what was finished is saved: rerun with "
           "the same flags (and --resume for an evaluation) to go on", 130)

  app.run(wrapped, flags_parser=lambda argv: parse_flags(argv, commands))
