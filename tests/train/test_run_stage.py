"""One place knows the stages, methods and their combinations (issue 52:
``train.stage=hygrl_multihop`` was accepted by the config check and refused
by the stage driver)."""

import pytest

from configs import csqa, hygrl_2wiki
from configs import test as test_config
from racer_jax.errors import ConfigError
from racer_jax.hygrl import multihop_stage
from racer_jax.runs import config_checks, registry
from racer_jax.train import run_stage


def test_every_stage_and_method_the_check_accepts_has_a_driver():
  for method in registry.METHODS.names():
    config = test_config.get_config()
    config.method = method
    config_checks.check_config(config)
    assert callable(run_stage.stage_trainer(config))
  for stage in registry.TRAIN_STAGES.names():
    config = test_config.get_config()
    config.train.stage = stage
    config.refiner.walker_workdir = "walker_run"
    if stage in ("hygrl_multihop", "graphdancer"):
      config.method = stage   # the stage of its own method
    assert callable(run_stage.stage_trainer(config))


@pytest.mark.parametrize("stage", ["walker", "hygrl_multihop"])
def test_multihop_trains_under_either_name(stage):
  config = hygrl_2wiki.get_config()
  config.train.stage = stage
  assert run_stage.stage_trainer(config) is multihop_stage.train


@pytest.mark.parametrize("method,stage", [
    ("racer", "hygrl_multihop"), ("hygrl", "hygrl_multihop"),
    ("hygrl_multihop", "refiner"), ("hygrl_multihop", "answer"),
    ("racer", "graphdancer"), ("graphdancer", "answer")])
def test_other_combinations_are_refused_in_one_line(method, stage):
  config = (hygrl_2wiki.get_config() if method == "hygrl_multihop"
            else test_config.get_config())
  config.method, config.train.stage = method, stage
  with pytest.raises(ConfigError, match=f"train.stage='{stage}' with "
                     f"method='{method}'"):
    run_stage.stage_trainer(config)


@pytest.mark.parametrize("config_of,change,message", [
    (csqa.get_config, {"walker.heuristic_weight": 1.0},
     "walker.heuristic_weight: not a setting"),
    (csqa.get_config, {"walker.bandwidth": 0}, "walker.bandwidth=0"),
    (hygrl_2wiki.get_config, {"multihop.node_pairs": "cross_encoder"},
     "needs multihop.relevance=cross_encoder_state"),
    (hygrl_2wiki.get_config, {"multihop.relevance": "cross_encoder",
                              "hygrl.policy_features": "embedding"},
     "set hygrl.policy_features=scores"),
    (hygrl_2wiki.get_config, {"multihop.reranker.pairs_per_chunk": -1},
     "pairs_per_chunk=-1"),
])
def test_settings_a_method_cannot_use_are_refused_before_any_work(
    config_of, change, message):
  config = config_of()
  for key, value in change.items():
    *sections, name = key.split(".")
    node = config
    for s in sections:
      node = node[s]
    node[name] = value
  with pytest.raises(ConfigError, match=message):
    run_stage.stage_trainer(config)
