"""The walker run's host side: the policy and static update settings built
from a config, the train state (restored from the newest checkpoint, else
fresh, the shared memory optionally taken from another run) and the update
loop with its checkpoints, metrics and periodic evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import jax

from racer_jax.runs import run_config
from racer_jax.runs.checkpoints import Checkpointer, restore_run
from racer_jax.runs.update_loop import run_stage_updates
from racer_jax.walker import reward as reward_lib
from racer_jax.walker import update as train_lib
from racer_jax.walker.policy import WalkerPolicy
from racer_jax.walker.rollout import RolloutConfig


def load_memory(workdir, num_edges: int, embed_dim: int, log=print):
  """The shared memory of another walker run's newest checkpoint (same
  graph store required: the memory is indexed by its global edge ids)."""
  workdir = Path(workdir)
  other = run_config.load(workdir, "walker run")
  if not memory_on(other):
    raise ValueError(f"{workdir} kept no shared memory (memory.enabled)")
  _, state, _, step = restore_walker(other, workdir, embed_dim=embed_dim,
                                     num_edges=num_edges, log=log)
  log(f"shared memory from {workdir} step {step}: "
      f"{int((state.memory.success > 0).sum()):,} edges with successes")
  return state.memory


def walker_state(config, ws, policy, optimizer, workdir: Path, log=print):
  """``(state, checkpointer, record)``: the newest readable checkpoint of
  ``workdir`` (its saved record), else a fresh state of ``config.seed``
  (record ``{}``) whose memory comes from ``memory.init_from`` if set."""
  t = config.train
  state = train_lib.create_train_state(
      policy, optimizer, config.seed, ws.concept_emb.shape[1],
      memory_edges=ws.kg.num_edges if memory_on(config) else 0)
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state, record, start = restored
    log(f"resuming from step {start}")
    return state, ckpt, record
  if memory_on(config) and config.memory.init_from:
    state = state.replace(memory=load_memory(
        config.memory.init_from, ws.kg.num_edges, ws.concept_emb.shape[1],
        log))
  return state, ckpt, {}


def run_walker_updates(config, workdir: Path, state, ckpt: Checkpointer,
                       one_update: Callable, evaluate: Callable, *,
                       stop_after: int | None, progress: bool,
                       desc: str) -> dict:
  """Runs ``one_update(state, step)`` from the state's step to
  ``train.num_steps`` (or ``stop_after`` updates), checkpointing,
  logging and evaluating (``evaluate(state, step)`` every
  ``train.eval_every``); returns the last logged metrics."""
  t = config.train
  start = int(jax.device_get(state.step))
  _, last, _ = run_stage_updates(
      state, one_update, config=config, workdir=workdir, ckpt=ckpt,
      start=start, total=t.num_steps, stop_after=stop_after,
      record=lambda done: {},
      evaluate=evaluate if t.eval_every else None, eval_every=t.eval_every,
      progress=progress, desc=desc,
      stall_timeout_s=t.stall_timeout_s or None)
  return last


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
