"""The walker run's host side: the train state (restored from the newest
checkpoint, else fresh, the shared memory optionally taken from another
run) and the update loop with its checkpoints, metrics and periodic
evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import jax

from racer_jax.rl import walker_update as train_lib
from racer_jax.runs.builders import memory_on, restore_walker
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.update_loop import run_stage_updates
from racer_jax.runs import run_config


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
