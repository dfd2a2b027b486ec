"""Which stage driver trains a config: ``launch/train.py``'s one call.

``method`` picks the walker's family (``racer``: RACER's walker on the
whole graph; ``hygrl``: HyGRL's beam-search policy on ConceptNet;
``hygrl_multihop``: HyGRL on a passage graph, its own setting) and ``train.stage`` the stage (``walker``,
``refiner``, ``answer``). Only the walker trains across several processes.
"""

from __future__ import annotations

from typing import Callable

import jax

from racer_jax.errors import ConfigError
from racer_jax.runs import registry, workdir_lock
from racer_jax.runs.config_checks import check_config


def stage_trainer(config) -> Callable[..., dict]:
  """``train(config, data_dir, workdir, *, progress)`` of the config's
  stage (:data:`racer_jax.runs.registry.TRAIN_STAGES`, else the method's
  own, :data:`~racer_jax.runs.registry.METHODS`); ConfigError (from
  :func:`check_config`, the one place that knows the combinations) for one
  that cannot run."""
  check_config(config)
  stage = config.train.stage
  if stage == "refiner" and not config.refiner.walker_workdir:
    raise ConfigError("--config.train.stage=refiner needs "
                      "--config.refiner.walker_workdir=<a walker run>")
  run = registry.TRAIN_STAGES.get(stage) or registry.METHODS.get(
      config.method)
  if jax.process_count() > 1 and run not in (
      registry.METHODS.get("racer"), registry.METHODS.get("graphdancer")):
    raise ConfigError(
        f"method={config.method!r} stage={stage!r} trains in one process; "
        "multi-process training covers the walker (method=racer, "
        "stage=walker) and GraphDancer's explorer (method=graphdancer)")
  return run


def train(config, data_dir, workdir, *, progress: bool = True) -> dict:
  """Trains the config's stage in ``workdir``, holding the folder's lock
  (a second process on it is refused, naming the holder)."""
  run = stage_trainer(config)
  with workdir_lock.hold(workdir, jax.process_index()):
    return run(config, data_dir, workdir, progress=progress)
