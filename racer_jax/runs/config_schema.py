"""The typed schema of a run's configuration, and the one check of its values.

``configs/default.py`` declares every setting once, as a field of a frozen
dataclass per section: its type, default, documentation and the values it
may take (:func:`setting`). A run's config is the ``ml_collections.
ConfigDict`` built from those dataclasses (:func:`to_config_dict`), which the
experiment configs (``configs/*.py``) override and the launchers take with
``--config.SECTION.FIELD=VALUE`` (a misspelt name is refused with "did you
mean"; a value of the wrong type by absl). :func:`field_errors` checks every
value against its field's declaration; :mod:`racer_jax.runs.config_checks`
adds the checks across fields, and both run before any work.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from typing import Any, Iterator

import ml_collections


@dataclasses.dataclass(frozen=True)
class Rule:
  """What one field may hold: ``choices`` (a closed set), integer or real
  bounds (``at_least``, ``above``: strictly, ``at_most``)."""
  doc: str
  choices: tuple = ()
  at_least: float | None = None
  above: float | None = None
  at_most: float | None = None


def setting(default, doc: str, *, choices=(), at_least=None, above=None,
            at_most=None):
  """A config field: its default, what it means and what it may hold."""
  rule = Rule(doc, tuple(choices), at_least, above, at_most)
  if isinstance(default, (list, dict)):
    raise TypeError("a setting's default is immutable: use a tuple")
  return dataclasses.field(default=default, metadata={"rule": rule})


def section(cls, *, more_keys: bool = False):
  """A config section: the dataclass ``cls`` with its defaults.
  ``more_keys``: a config file may add string fields of its own (a file per
  split of its own naming, ``data.files``)."""
  return dataclasses.field(default_factory=cls, metadata={
      "section": True, "more_keys": more_keys})


def _is_section(f: dataclasses.Field) -> bool:
  return bool(f.metadata.get("section"))


def declared(schema, prefix: str = "") -> Iterator[tuple[str, Any, Rule]]:
  """``(dotted name, default, rule)`` of every field of the dataclass
  instance ``schema``, sections recursed into."""
  for f in dataclasses.fields(schema):
    value = getattr(schema, f.name)
    if _is_section(f):
      yield from declared(value, f"{prefix}{f.name}.")
    else:
      yield f"{prefix}{f.name}", value, f.metadata["rule"]


def to_config_dict(schema, aliases: dict[str, str] = ()
                   ) -> ml_collections.ConfigDict:
  """The ConfigDict of the dataclass instance ``schema`` (sections become
  nested ConfigDicts, in declaration order). ``aliases``: top-level names
  that refer to another field (``{"stage": "train.stage"}``): setting either
  sets both."""
  aliases = dict(aliases)
  targets = set(aliases.values())

  def build(node, prefix):
    out = ml_collections.ConfigDict()
    for f in dataclasses.fields(node):
      name = f"{prefix}{f.name}"
      if name in aliases:
        continue
      value = getattr(node, f.name)
      if _is_section(f):
        out[f.name] = build(value, f"{name}.")
      elif name in targets:
        out[f.name] = ml_collections.FieldReference(value)
      else:
        out[f.name] = value
    return out

  config = build(schema, "")
  for alias, target in aliases.items():
    parent, leaf = target.rsplit(".", 1)
    config[alias] = config[parent].get_ref(leaf)
  return config


MISSING = object()


def value_at(config, key: str):
  """``config``'s value at the dotted ``key``, or :data:`MISSING`."""
  node = config
  for part in key.split("."):
    if part not in node:
      return MISSING
    node = node[part]
  return node


def check_value(key: str, value, rule: Rule) -> str | None:
  """Why ``value`` is not allowed for the field ``key``, or None."""
  if rule.choices and value not in rule.choices:
    close = difflib.get_close_matches(str(value), map(str, rule.choices), 1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{key}={value!r}: expected one of {list(rule.choices)}{hint}"
  bounds = [f"≥ {rule.at_least}" if rule.at_least is not None else "",
            f"> {rule.above}" if rule.above is not None else "",
            f"≤ {rule.at_most}" if rule.at_most is not None else ""]
  if not any(bounds):
    return None
  if isinstance(value, bool) or not isinstance(value, (int, float)) or (
      not math.isfinite(value)):
    return f"{key}={value!r}: must be a finite number"
  if isinstance(rule.at_least, int) and not isinstance(value, int):
    return f"{key}={value!r}: must be an integer {bounds[0]}"
  if ((rule.at_least is not None and value < rule.at_least) or
      (rule.above is not None and value <= rule.above) or
      (rule.at_most is not None and value > rule.at_most)):
    kind = "an integer " if isinstance(rule.at_least, int) else ""
    return f"{key}={value!r}: must be {kind}{' and '.join(b for b in bounds if b)}"
  return None


def _open_sections(schema, prefix: str = "") -> Iterator[str]:
  for f in dataclasses.fields(schema):
    if _is_section(f):
      if f.metadata.get("more_keys"):
        yield f"{prefix}{f.name}."
      yield from _open_sections(getattr(schema, f.name), f"{prefix}{f.name}.")


def field_errors(config, schema) -> list[str]:
  """Every value of ``config`` its field's declaration in ``schema`` does
  not allow, and every section field the schema does not declare."""
  errors = []
  known = set()
  open_prefixes = tuple(_open_sections(schema))
  for key, _, rule in declared(schema):
    known.add(key)
    value = value_at(config, key)
    if value is not MISSING:
      why = check_value(key, value, rule)
      if why:
        errors.append(why)
  names = {k.split(".", 1)[0] for k in known}
  for name in config.keys():
    node = config[name]
    if isinstance(node, ml_collections.ConfigDict) and name in names:
      for key in _leaves(node, f"{name}."):
        if key.startswith(open_prefixes) and isinstance(
            value_at(config, key), str):
          continue
        if key not in known and not any(k.startswith(key + ".")
                                        for k in known):
          close = difflib.get_close_matches(key, known, 1)
          errors.append(f"{key}: not a setting" + (
              f" (did you mean {close[0]}?)" if close else ""))
  return errors


def _leaves(node, prefix: str) -> Iterator[str]:
  for name in node.keys():
    value = node[name]
    if isinstance(value, ml_collections.ConfigDict):
      yield from _leaves(value, f"{prefix}{name}.")
    else:
      yield f"{prefix}{name}"
