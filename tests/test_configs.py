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


def test_stage_alias_sets_train_stage():
  from configs import default
  config = default.get_config()
  config.stage = "refiner"           # what --config.stage=refiner does
  assert config.train.stage == "refiner"
  config.train.stage = "answer"
  assert config.stage == "answer"
