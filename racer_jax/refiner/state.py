"""The path refiner's train state and the frozen walker it reads paths from.

Built here (not in the refiner's stage, :mod:`racer_jax.refiner.stage`)
because the GraphAgent and the refiner's evaluation restore the same state.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from racer_jax.memory import edge_memory
from racer_jax.refiner import model as refiner_lib
from racer_jax.refiner import update as refiner_update
from racer_jax.walker import update as train_lib
from racer_jax.walker import run as walker_run
from racer_jax.walker import inputs as walker_inputs
from racer_jax.runs import run_config


def refiner_config(config, wconfig=None) -> refiner_update.RefinerConfig:
  """The refiner's static settings; ``wconfig`` (its walker run's config)
  gives the walker's concept caps."""
  r = config.refiner
  w = (wconfig or config).walker
  return refiner_update.RefinerConfig(
      paths_per_choice=r.paths_per_choice, sample_hops=r.sample_hops,
      temperature=r.temperature, top_k=r.top_k, loss=r.loss,
      max_question_concepts=w.max_question_concepts,
      max_choice_concepts=w.max_choice_concepts,
      choice_head=r.choice_head,
      choice_weight=r.choice_weight)


def walker_graph(wconfig, ws, log=print):
  """The whole capped graph the walker of ``wconfig`` walks."""
  return walker_inputs.whole_graph(wconfig, ws, log)


def make_refiner(config) -> refiner_lib.PathRefiner:
  """The refiner of ``config``; λ is the one chosen on the validation slice
  when a trained run's config records it (``chosen_on_validation``)."""
  r = config.refiner
  mix = run_config.chosen(config, "refiner_mix", r.mix)
  return refiner_lib.PathRefiner(hidden=r.hidden, num_heads=r.num_heads,
                                 mix=float(mix),
                                 choice_head=r.choice_head,
                                 beta=r.beta)


def create_state(config, embed_dim: int, num_hops: int):
  """``(refiner, optimizer, fresh TrainState)``."""
  refiner = make_refiner(config)
  optimizer = optax.chain(optax.clip_by_global_norm(config.train.grad_clip),
                          optax.adam(config.refiner.learning_rate))
  rng = jax.random.PRNGKey(config.seed)
  params = refiner_lib.init_refiner(refiner, jax.random.fold_in(rng, 0x5eed),
                                    2, num_hops, embed_dim)
  state = train_lib.TrainState(params=params, opt_state=optimizer.init(params),
                               step=jnp.zeros((), jnp.int32), rng=rng,
                               memory=edge_memory.empty(1))  # unused
  return refiner, optimizer, state


def load_walker(walker_workdir, ws, log=print):
  """The frozen walker: ``(walker config, policy, state, step,
  edge_quality or None)``."""
  walker_workdir = Path(walker_workdir)
  if not (walker_workdir / "config.json").exists():
    raise FileNotFoundError(
        f"refiner.walker_workdir={str(walker_workdir)!r} holds no walker "
        "run (config.json): train the walker first")
  wconfig = run_config.load(walker_workdir, "walker run")
  policy, state, _, step = walker_run.restore_walker(
      wconfig, walker_workdir, embed_dim=ws.concept_emb.shape[1],
      num_edges=ws.kg.num_edges, log=log)
  quality = None
  if walker_run.memory_on(wconfig):
    quality = np.asarray(edge_memory.quality(
        state.memory, gamma=wconfig.memory.gamma,
        prior=wconfig.memory.prior))
  return wconfig, policy, state, step, quality
