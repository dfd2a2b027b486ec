"""Every setting is declared once, typed and documented, in configs/default.py
(racer_jax/runs/config_schema.py), and every config is checked against it."""

import dataclasses
import importlib
import typing

import pytest

from configs import default
from racer_jax.errors import ConfigError
from racer_jax.runs import config_schema
from racer_jax.runs.config_checks import check_config
from tests.conftest import REPO

CONFIGS = sorted(p.stem for p in (REPO / "configs").glob("*.py")
                 if p.stem not in ("__init__", "default"))
DECLARED = {key: (value, rule) for key, value, rule in
            config_schema.declared(default.RunConfig())}


def _leaves(config, prefix=""):
  for name in config.keys():
    value = config[name]
    if hasattr(value, "to_dict"):
      yield from _leaves(value, f"{prefix}{name}.")
    else:
      yield f"{prefix}{name}"


def test_the_default_config_is_the_schema():
  config = default.get_config()
  assert set(_leaves(config)) - {"stage"} == set(DECLARED)
  for key, (value, _) in DECLARED.items():
    assert config_schema.value_at(config, key) == value, key
  config.stage = "answer"       # one field under two names
  assert config.train.stage == "answer"


@pytest.mark.parametrize("name", CONFIGS)
def test_every_shipped_config_sets_only_declared_fields(name):
  config = importlib.import_module(f"configs.{name}").get_config()
  assert set(_leaves(config)) - {"stage"} <= set(DECLARED), name
  check_config(config)


def test_every_field_is_typed_and_documented():
  hints = {}
  for cls in _sections(default.RunConfig):
    for f in dataclasses.fields(cls):
      hints[f.name, cls] = typing.get_type_hints(cls)[f.name]
  for key, (value, rule) in DECLARED.items():
    assert len(rule.doc) > 10, f"{key}: no documentation"
    assert not rule.choices or value in rule.choices, key
  for (name, cls), hint in hints.items():
    value = getattr(cls(), name)
    origin = typing.get_origin(hint) or hint
    if not dataclasses.is_dataclass(value):
      assert isinstance(value, origin), (cls.__name__, name, hint, value)


def _sections(cls):
  yield cls
  for f in dataclasses.fields(cls):
    if f.metadata.get("section"):
      yield from _sections(f.default_factory)


@pytest.mark.parametrize("key, value, message", [
    ("walker.recurrent", "gur", r"walker.recurrent='gur': expected one of "
     r"\['gru', 'lstm'\] \(did you mean 'gru'\?\)"),
    ("refiner.loss", "pairwize", r"did you mean 'pairwise'"),
    ("batch.batch_size", 0, r"batch.batch_size=0: must be an integer ≥ 1"),
    ("train.gamma", 1.5, r"train.gamma=1.5: must be ≥ 0.0 and ≤ 1.0"),
    ("train.learning_rate", 0.0, r"must be > 0.0"),
    ("answer.dropout", float("nan"), r"must be a finite number"),
])
def test_a_value_its_field_does_not_allow_is_refused(key, value, message):
  config = default.get_config()
  section, name = key.split(".")
  config[section][name] = value
  with pytest.raises(ConfigError, match=message):
    check_config(config)


def test_a_misspelt_field_in_a_config_file_is_refused():
  config = default.get_config()
  config.walker.bandwidht = 64   # a config file can add keys; the check not
  with pytest.raises(ConfigError, match=r"walker.bandwidht: not a setting "
                     r"\(did you mean walker.bandwidth\?\)"):
    check_config(config)


def test_a_split_file_of_its_own_naming_is_allowed():
  config = default.get_config()
  config.data.dataset = "jsonl"
  config.data.files.extra = "extra.jsonl"   # a split named by the user
  check_config(config)
  config.data.files.broken = 3
  with pytest.raises(ConfigError, match="data.files.broken: not a setting"):
    check_config(config)


def test_a_setting_default_must_be_immutable():
  with pytest.raises(TypeError):
    config_schema.setting([1, 2], "a list")
