"""Objects every walker driver builds the same way from a config."""

from __future__ import annotations

from pathlib import Path

import jax
from jax.experimental import multihost_utils

from racer_jax.rl import reward as reward_lib
from racer_jax.rl import walker_update as train_lib
from racer_jax.rl.policy import WalkerPolicy
from racer_jax.rl.rollout import RolloutConfig
from racer_jax.runs import run_config
from racer_jax.runs.checkpoints import restore_run
from racer_jax.runs.workspace import load_workspace


def walker_train_config(config) -> train_lib.WalkerTrainConfig:
  """The static update settings from an ``ml_collections`` config."""
  w, t, r = config.walker, config.train, config.reward
  return train_lib.WalkerTrainConfig(
      rollout=RolloutConfig(
          max_steps=w.max_steps, top_k=w.top_k, prune=w.prune,
          prune_weights=tuple(float(x) for x in w.prune_weights),
          stop_at_target=w.stop_at_target, temperature=t.temperature,
          teacher_stops=bool(w.teacher_stops),
          score_tables=bool(w.score_tables),
          memory_beta=memory_beta(config)),
      num_walkers=w.num_walkers, gamma=t.gamma, entropy_coef=t.entropy_coef,
      teacher_weight=t.teacher_weight, teacher_return=t.teacher_return,
      reward=reward_lib.RewardWeights(**{name: float(r[name]) for name
                                         in reward_lib.TERMS}),
      memory_update=bool(memory_on(config) and
                         config.memory.update_in_training),
      memory_failures=bool(memory_on(config) and
                           config.memory.train_failures),
      memory_gamma=float(config.memory.gamma),
      memory_prior=float(config.memory.prior))


def restore_walker(config, workdir, *, embed_dim: int, num_edges: int,
                   step: int | None = None, log=print):
  """A walker run's checkpoint: ``(policy, state, record, step)``.

  ``num_edges``: the graph store's, used when the run kept a memory.
  """
  policy = make_policy(config)
  optimizer = train_lib.make_optimizer(config.train.learning_rate,
                                       config.train.grad_clip)
  template = jax.eval_shape(lambda: train_lib.create_train_state(
      policy, optimizer, config.seed, embed_dim,
      memory_edges=num_edges if memory_on(config) else 0))
  state, record, step = restore_run(workdir, template, "walker", step=step,
                                    log=log)
  # device arrays (the memory is updated with .at[] scatters)
  return policy, jax.tree.map(jax.numpy.asarray, state), record, step


def memory_on(config) -> bool:
  """The run keeps a shared memory."""
  return bool(config.memory.enabled)


def memory_beta(config) -> float:
  return float(config.memory.beta) if memory_on(config) else 0.0


def make_policy(config) -> WalkerPolicy:
  return WalkerPolicy(hidden=config.walker.hidden,
                      recurrent=config.walker.recurrent)


def p_teacher_at(config, step: int) -> float:
  """Linear schedule from ``train.p_teacher`` to ``train.p_teacher_final``."""
  t = config.train
  frac = min(step / max(t.num_steps, 1), 1.0)
  return float(t.p_teacher + frac * (t.p_teacher_final - t.p_teacher))


def prep_dir_of(config, workdir) -> Path:
  return Path(config.prep_dir) if config.prep_dir else Path(workdir) / "prep"


def start_run(config, data_dir, workdir, *, progress: bool, log,
              stage: str = "walker"):
  """What every training run does first: create ``workdir``, save the
  config there, and load the training split (plus ``eval.split`` when
  ``train.eval_every`` is set). The training split's dataset leaves out the
  answer stage's validation slice (``answer.validation_fraction``): the
  critic is calibrated there, so no part of the stack trains on it.
  Returns ``(workdir, workspace, eval_split or None)``."""
  workdir = Path(workdir)
  primary = jax.process_index() == 0
  t = config.train
  eval_split = config.eval.split if t.eval_every else None
  splits = [t.split] + ([eval_split] if eval_split and eval_split != t.split
                        else [])

  def load():
    return load_workspace(config, data_dir, prep_dir_of(config, workdir),
                          splits, progress=progress and primary,
                          log=log if primary else (lambda _: None),
                          hold_out=[t.split])
  if jax.process_count() == 1:
    workdir.mkdir(parents=True, exist_ok=True)
    run_config.save(config, workdir, stage)
    return workdir, load(), eval_split
  # several processes: the first prepares and caches, the others then read
  if primary:
    workdir.mkdir(parents=True, exist_ok=True)
    run_config.save(config, workdir, stage)
    ws = load()
  multihost_utils.sync_global_devices("racer_jax: data prepared")
  if not primary:
    ws = load()
  return workdir, ws, eval_split
