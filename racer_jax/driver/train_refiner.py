"""The refiner's training run (``--config.train.stage=refiner``).

Paths come from a trained walker run (``refiner.walker_workdir``): its
parameters, and its shared memory when it kept one, are loaded and frozen;
each update generates the candidate paths of a batch and trains the refiner
on them, in one jitted program. Checkpointed and resumable like the other
runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from racer_jax.driver import common
from racer_jax.driver.checkpoints import Checkpointer
from racer_jax.driver.loop import run_updates
from racer_jax.driver.metrics import MetricWriter
from racer_jax.memory import edge_memory
from racer_jax.refine import refiner as refiner_lib
from racer_jax.refine import training
from racer_jax.rl import parallel
from racer_jax.rl import train as train_lib


def refiner_config(config, wconfig=None) -> training.RefinerConfig:
  """The refiner's static settings; ``wconfig`` (its walker run's config)
  gives a whole-graph walker's concept caps."""
  r = config.refiner
  w = (wconfig or config).walker
  return training.RefinerConfig(
      paths_per_choice=r.paths_per_choice, sample_hops=r.sample_hops,
      temperature=r.temperature, top_k=r.top_k, loss=r.loss,
      max_question_concepts=w.get("max_question_concepts", 32),
      max_choice_concepts=w.get("max_choice_concepts", 8))


def walker_graph(wconfig, ws, log=print):
  """The whole capped graph a ``walker.graph = "kg"`` walker walks, else
  None (the subgraph walker walks each batch's subgraphs)."""
  if wconfig.walker.get("graph", "subgraph") != "kg":
    return None
  from racer_jax.driver.train_kg_walker import whole_graph
  return whole_graph(wconfig, ws, log)


def make_refiner(config) -> refiner_lib.PathRefiner:
  r = config.refiner
  return refiner_lib.PathRefiner(hidden=r.hidden, num_heads=r.num_heads,
                                 mix=r.mix)


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
  wconfig = ml_collections.ConfigDict(json.loads(
      (walker_workdir / "config.json").read_text()))
  policy, state, _, step = common.restore_walker(
      wconfig, walker_workdir, embed_dim=ws.concept_emb.shape[1],
      num_edges=ws.kg.num_edges, log=log)
  quality = None
  if common.memory_on(wconfig):
    quality = np.asarray(edge_memory.quality(
        state.memory, gamma=wconfig.memory.gamma,
        prior=wconfig.memory.prior))
  return wconfig, policy, state, step, quality


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print,
          stop_after: int | None = None) -> dict:
  """Trains the refiner on paths of the frozen walker."""
  workdir, ws, _ = common.start_run(config, data_dir, workdir,
                                    progress=progress, log=log,
                                    stage="refiner")
  wconfig, walker, wstate, wstep, quality = load_walker(
      config.refiner.walker_workdir, ws, log)
  log(f"paths from the walker in {config.refiner.walker_workdir} (step "
      f"{wstep}; shared memory {'on' if quality is not None else 'off'})")
  t = config.train
  dataset = ws.splits[t.split].dataset
  refiner, optimizer, state = create_state(config, ws.concept_emb.shape[1],
                                           wconfig.walker.max_steps)
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state = restored[0]
    log(f"resuming from step {int(state.step)}")
  start, total = int(state.step), config.refiner.num_steps
  mesh = parallel.make_mesh(t.num_devices)
  state = parallel.replicate(mesh, state)
  args = parallel.replicate(mesh, (
      wstate.params, ws.concept_emb, ws.relation_emb,
      np.zeros(ws.kg.num_edges, np.float32) if quality is None else quality,
      walker_graph(wconfig, ws, log)))
  step_fn = training.make_refiner_step(
      refiner, optimizer, walker, common.walker_train_config(wconfig),
      refiner_config(config, wconfig))
  bs = config.batch.batch_size

  def one_update(state, step):
    batch = parallel.shard_batch(mesh, dataset.batch_for_step(
        step, config.seed, bs))
    return step_fn(state, batch, *args)

  end = total if stop_after is None else min(total, start + stop_after)
  writer = MetricWriter(workdir, enabled=jax.process_index() == 0)
  state, last = run_updates(
      state, one_update, start=start, end=end, total=total, ckpt=ckpt,
      writer=writer, log_every=t.log_every,
      checkpoint_every=t.checkpoint_every,
      record=lambda done: {"step": done, "stage": "refiner",
                           "walker_workdir": config.refiner.walker_workdir,
                           "walker_step": wstep,
                           "config": json.loads(config.to_json())},
      progress=progress, desc="train refiner")
  writer.close()
  ckpt.close()
  return last
