"""The walker's training run: data, jitted updates, logging, checkpoints.

``train(config, data_dir, workdir)`` is the whole run. It resumes from the
newest checkpoint in ``workdir``; since the batch of step ``s`` and its
randomness are functions of ``(seed, s)``, a resumed run ends with the same
parameters as an uninterrupted one.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import tqdm

from racer_jax.driver.checkpoints import Checkpointer
from racer_jax.driver.common import (make_policy, p_teacher_at, prep_dir_of,
                                     walker_train_config)
from racer_jax.driver.inputs import load_workspace
from racer_jax.driver.metrics import MetricWriter
from racer_jax.eval.walker_eval import run_eval
from racer_jax.rl import parallel
from racer_jax.rl import train as train_lib


def save_config(config, workdir) -> None:
  path = Path(workdir) / "config.json"
  path.write_text(config.to_json(indent=1))


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print,
          stop_after: int | None = None) -> dict:
  """Trains the walker; returns the last logged metrics.

  ``stop_after`` ends this invocation after that many updates (as if the
  process were stopped); the next call with the same workdir resumes.
  """
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  save_config(config, workdir)
  t = config.train
  eval_split = config.eval.split if t.eval_every else None
  ws = load_workspace(config, data_dir, prep_dir_of(config, workdir),
                      [t.split] + ([eval_split] if eval_split and
                                   eval_split != t.split else []),
                      progress=progress, log=log)
  dataset = ws.splits[t.split].dataset
  policy = make_policy(config)
  optimizer = train_lib.make_optimizer(t.learning_rate, t.grad_clip)
  state = train_lib.create_train_state(policy, optimizer, config.seed,
                                       ws.concept_emb.shape[1])
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state, _, start = restored
    log(f"resuming from step {start}")
  start = int(state.step)
  mesh = parallel.make_mesh(t.num_devices)
  state = parallel.replicate(mesh, state)
  concept_emb = parallel.replicate(mesh, ws.concept_emb)
  relation_emb = parallel.replicate(mesh, ws.relation_emb)
  update = train_lib.make_train_step(policy, optimizer,
                                     walker_train_config(config))
  evaluate_fn = train_lib.make_eval_step(policy, walker_train_config(config))
  writer = MetricWriter(workdir, enabled=jax.process_index() == 0)
  bs = config.batch.batch_size
  pending, last, t0 = [], {}, time.perf_counter()
  end = t.num_steps if stop_after is None else min(t.num_steps,
                                                   start + stop_after)
  for step in tqdm.trange(start, end, desc="train walker",
                          disable=not progress, initial=start,
                          total=t.num_steps):
    batch = parallel.shard_batch(mesh, dataset.batch_for_step(
        step, config.seed, bs))
    state, metrics = update(state, batch, concept_emb, relation_emb,
                            np.float32(p_teacher_at(config, step)))
    pending.append(metrics)
    done = step + 1
    if done % t.log_every == 0 or done == t.num_steps:
      rows = jax.device_get(pending)
      pending = []
      if min(r["finite"] for r in rows) < 1:
        bad = done - len(rows) + [r["finite"] for r in rows].index(0.0)
        raise FloatingPointError(
            f"non-finite loss or gradient at step {bad} (the update was "
            f"skipped, parameters are intact); last checkpoint: "
            f"{ckpt.all_steps()[-1:] or 'none'} in {ckpt.directory}. Lower "
            "train.learning_rate or check the inputs.")
      last = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
      last["steps_per_second"] = len(rows) / (time.perf_counter() - t0)
      t0 = time.perf_counter()
      writer.write(done, last, prefix="train/")
    if t.eval_every and (done % t.eval_every == 0 or done == t.num_steps):
      figures = run_eval(evaluate_fn, state.params, ws.splits[eval_split],
                         ws.kg, concept_emb, relation_emb,
                         config.eval.batch_size)
      writer.write(done, {k: v for k, v in figures.items()
                          if isinstance(v, float)}, prefix="eval/")
      last.update({"eval_" + k: v for k, v in figures.items()})
    if done % t.checkpoint_every == 0 or done == t.num_steps:
      ckpt.save(done, jax.device_get(state), {
          "step": done, "config": json.loads(config.to_json())})
  writer.close()
  ckpt.close()
  return last
