"""The explorer's supervised warm start through tunix's ``PeftTrainer``.

The rows are gold trajectories (:mod:`racer_jax.graphdancer.trajectories`)
encoded with their loss masks (:mod:`racer_jax.graphdancer.inputs`): tunix's
default loss is the token mean of the next-token cross-entropy over the
targets whose mask is 1, so the prompt and the observations are read but
never learned. Attention and positions come from the padding alone.

The batches are a fixed function of the seed and the step (one permutation
per epoch), and the trainer saves params and optimizer state through orbax
every ``checkpoint_every`` steps: a stopped run restarts from its last
checkpoint, tunix skips the batches already seen, and the run ends as one
that never stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator, Sequence

import jax
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import nnx

from racer_jax.graphdancer.inputs import pad
from racer_jax.lm import causal_lm


def batches(rows: Sequence[tuple[list[int], list[int]]], batch_size: int,
            length: int, pad_id: int, seed: int) -> Iterator[dict]:
  """Endless ``{"tokens", "loss_mask"}`` int32 ``[batch_size, length]``
  batches: epoch ``e`` visits the rows in the permutation of
  ``(seed, e)``; a last short batch is filled from the next epoch's order
  rather than dropped."""
  order: list[int] = []
  epoch = 0
  while True:
    while len(order) < batch_size:
      order += list(np.random.default_rng([seed, epoch]).permutation(
          len(rows)))
      epoch += 1
    take, order = order[:batch_size], order[batch_size:]
    yield {"tokens": pad([rows[i][0] for i in take], length, pad_id),
           "loss_mask": pad([rows[i][1] for i in take], length, 0)}


def model_inputs(pad_id: int) -> Callable[[dict], dict]:
  """The trainer's batch -> the default loss's arguments: attention and
  positions from the padding, the loss mask as ``input_mask``."""
  from tunix.sft import utils as sft_utils

  def inputs(batch):
    real = batch["tokens"] != pad_id
    return {"input_tokens": batch["tokens"],
            "input_mask": batch["loss_mask"],
            "positions": sft_utils.build_positions_from_mask(real),
            "attention_mask": sft_utils.make_causal_attn_mask(real)}
  return inputs


def sequence_length(rows, multiple: int = 64) -> int:
  """The batches' length: the longest row, rounded up to ``multiple``."""
  longest = max(len(ids) for ids, _ in rows)
  return -(-longest // multiple) * multiple


def train(lm: causal_lm.CausalLM, rows, *, steps: int, batch_size: int,
          learning_rate: float, weight_decay: float, warmup_steps: int,
          seed: int, checkpoint_dir: Path, checkpoint_every: int,
          log: Callable[[str], None] = print
          ) -> tuple[causal_lm.CausalLM, list[float]]:
  """``(the fine-tuned LM, the training loss per step run now)``;
  resumes from ``checkpoint_dir`` when it holds a checkpoint."""
  from tunix.sft import peft_trainer

  # a copy: the trainer updates the module's variables in place
  model = nnx.merge(lm.graphdef, jax.tree.map(lambda x: x, lm.state))
  schedule = optax.join_schedules(
      [optax.linear_schedule(0.0, learning_rate, max(warmup_steps, 1)),
       optax.constant_schedule(learning_rate)], [max(warmup_steps, 1)])
  trainer = peft_trainer.PeftTrainer(
      model, optax.adamw(schedule, weight_decay=weight_decay),
      peft_trainer.TrainingConfig(
          eval_every_n_steps=steps + 1, max_steps=steps,
          checkpoint_root_directory=str(checkpoint_dir),
          checkpointing_options=ocp.CheckpointManagerOptions(
              save_interval_steps=checkpoint_every, max_to_keep=2),
          pbar_description="explorer SFT"))
  pad_id = lm.tokenizer.pad_id
  trainer.with_gen_model_input_fn(model_inputs(pad_id))
  done = trainer.train_steps
  if done:
    log(f"explorer SFT: resuming after step {done} of {steps}")
  length = sequence_length(rows)
  with causal_lm.rope_theta_of(model):
    trainer.train(batches(rows, batch_size, length, pad_id, seed))
  history = trainer.metrics_logger
  losses = ([float(x) for x in history.get_metric_history("", "loss",
                                                           "train")]
            if history.metric_exists("", "loss", "train") else [])
  graphdef, state = nnx.split(model)
  return causal_lm.CausalLM(graphdef=graphdef, state=state, meta=lm.meta,
                            tokenizer=lm.tokenizer, source=lm.source), losses


def restore(lm: causal_lm.CausalLM, checkpoint_dir: Path
            ) -> tuple[causal_lm.CausalLM, int]:
  """``(lm with the newest SFT checkpoint's parameters, its step)``;
  ``(lm, 0)`` when ``checkpoint_dir`` holds none."""
  from tunix.sft import checkpoint_manager

  manager = checkpoint_manager.CheckpointManager(str(checkpoint_dir))
  model = nnx.merge(lm.graphdef, jax.tree.map(lambda x: x, lm.state))
  step, _ = manager.maybe_restore(model)
  manager.close()
  if not step:
    return lm, 0
  graphdef, state = nnx.split(model)
  return causal_lm.CausalLM(graphdef=graphdef, state=state, meta=lm.meta,
                            tokenizer=lm.tokenizer, source=lm.source), step
