"""The refiner's training run (``--config.train.stage=refiner``).

Paths come from a trained walker run (``refiner.walker_workdir``): its
parameters, and its shared memory when it kept one, are loaded and frozen;
each update generates the candidate paths of a batch and trains the refiner
on them, in one jitted program. Checkpointed and resumable like the other
runs.
"""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np

from racer_jax.refiner import evaluation as refiner_eval
from racer_jax.refiner import update as refiner_update
from racer_jax.runs import parallel
from racer_jax.runs import builders
from racer_jax.walker import run as walker_run
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.refiner.state import (
  create_state,
  load_walker,
  refiner_config,
  walker_graph,
)
from racer_jax.runs.update_loop import run_stage_updates


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print,
          stop_after: int | None = None) -> dict:
  """Trains the refiner on paths of the frozen walker."""
  workdir, ws, _ = builders.start_run(config, data_dir, workdir,
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
  step_fn = refiner_update.make_refiner_step(
      refiner, optimizer, walker, walker_run.walker_train_config(wconfig),
      refiner_config(config, wconfig))
  bs = config.batch.batch_size

  def one_update(state, step):
    batch = parallel.shard_batch(mesh, dataset.batch_for_step(
        step, config.seed, bs))
    return step_fn(state, batch, *args)

  final, last, _ = run_stage_updates(
      state, one_update, config=config, workdir=workdir, ckpt=ckpt,
      start=start, total=total, stop_after=stop_after,
      record=lambda done: {"stage": "refiner",
                           "walker_workdir": config.refiner.walker_workdir,
                           "walker_step": wstep},
      progress=progress, desc="train refiner")
  if int(final.step) >= total and jax.process_index() == 0:
    # λ on the validation slice, once the refiner is trained
    chosen = refiner_eval.choose_mix(config, data_dir, workdir,
                                     progress=progress, log=log)
    if chosen is not None:
      last = {**last, "refiner_mix": chosen["refiner_mix"]}
  return last
