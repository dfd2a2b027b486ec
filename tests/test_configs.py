"""Config files: every one builds, and the stage can be named either way."""

import importlib
import json

import pytest


@pytest.mark.parametrize("name", ["default", "csqa", "obqa", "demo", "test",
                                  "hygrl_2wiki", "hygrl_hotpotqa",
                                  "hygrl_musique"])
def test_config_builds_and_serializes(name):
  config = importlib.import_module(f"configs.{name}").get_config()
  data = json.loads(config.to_json())
  assert data["stage"] == data["train"]["stage"] == "walker"


@pytest.mark.parametrize("name,arg", [("graphdancer_demo", None),
                                      ("graphdancer_csqa", None),
                                      ("graphdancer_2wiki", "cpu"),
                                      ("graphdancer_2wiki", "paper")])
def test_graphdancer_configs_pass_the_checks(name, arg):
  from racer_jax.runs.config_checks import check_config
  module = importlib.import_module(f"configs.{name}")
  config = module.get_config(arg) if arg else module.get_config()
  check_config(config)
  assert config.method == config.train.stage == "graphdancer"


def test_stage_alias_sets_train_stage():
  from configs import default
  config = default.get_config()
  config.stage = "refiner"           # what --config.stage=refiner does
  assert config.train.stage == "refiner"
  config.train.stage = "answer"
  assert config.stage == "answer"
