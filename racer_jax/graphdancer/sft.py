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

import contextlib
from pathlib import Path
from typing import Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from racer_jax.graphdancer.inputs import length_bucket, pad
from racer_jax.lm import causal_lm
from racer_jax.runs import parallel


def batches(rows: Sequence[tuple[list[int], list[int]]], batch_size: int,
            pad_id: int, seed: int) -> Iterator[dict]:
  """Endless ``{"tokens", "loss_mask"}`` int32 ``[batch_size, T]``
  batches, ``T`` the :func:`~racer_jax.graphdancer.inputs.length_bucket`
  of the batch's longest row: epoch ``e`` visits the rows in the
  permutation of ``(seed, e)``; a last short batch is filled from the next
  epoch's order rather than dropped."""
  order: list[int] = []
  epoch = 0
  while True:
    while len(order) < batch_size:
      order += list(np.random.default_rng([seed, epoch]).permutation(
          len(rows)))
      epoch += 1
    take, order = order[:batch_size], order[batch_size:]
    length = length_bucket(max(len(rows[i][0]) for i in take))
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


def token_loss(model: nnx.Module, input_tokens, input_mask, positions,
               attention_mask):
  """tunix's default SFT loss (the mean next-token negative log-likelihood
  over the tokens ``input_mask`` marks) without its one-hot targets:
  ``logsumexp - logit[target]`` (optax's integer-label cross-entropy)
  keeps a handful of ``[B, T, V]`` arrays alive instead of tens of them
  (2 x 1024 tokens of SmolLM2: 16.7 GB -> see the closing note)."""
  logits, _ = model(input_tokens, positions, None, attention_mask)
  targets, mask = input_tokens[:, 1:], input_mask[:, 1:].astype(jnp.float32)
  nll = optax.softmax_cross_entropy_with_integer_labels(
      logits[:, :-1, :].astype(jnp.float32), targets)
  return jnp.sum(nll * mask) / (jnp.sum(mask) + 1e-8)


def train(lm: causal_lm.CausalLM, rows, *, steps: int, batch_size: int,
          learning_rate: float, weight_decay: float, warmup_steps: int,
          seed: int, checkpoint_dir: Path, checkpoint_every: int,
          mesh=None, log: Callable[[str], None] = print
          ) -> tuple[causal_lm.CausalLM, list[float]]:
  """``(the fine-tuned LM, the training loss per step run now)``;
  resumes from ``checkpoint_dir`` when it holds a checkpoint. With a
  ``mesh`` (:func:`racer_jax.runs.parallel.make_mesh`) tunix's trainer
  runs over its devices: every batch split over them, the parameters and
  optimizer state sharded by the model's own partition specs (FSDP)."""
  from tunix.sft import peft_trainer

  # a copy: the trainer updates the module's variables in place
  model = nnx.merge(lm.graphdef, jax.tree.map(lambda x: x, lm.state))
  if mesh is not None:
    if batch_size % mesh.devices.size:
      raise ValueError(f"graphdancer.sft_batch_size={batch_size} does not "
                       f"split over {mesh.devices.size} devices")
    # tunix's axes: its models name "fsdp" and "tp" in their parameters'
    # partition specs; the batch goes over "fsdp", the parameters by
    # their specs (fully sharded data parallel)
    mesh = Mesh(mesh.devices.reshape(-1, 1), ("fsdp", "tp"))
    with mesh:
      state = nnx.state(model)
      nnx.update(model, jax.lax.with_sharding_constraint(
          state, nnx.get_partition_spec(state)))
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
          pbar_description="explorer SFT", data_sharding_axis=("fsdp",)))
  pad_id = lm.tokenizer.pad_id
  trainer.with_gen_model_input_fn(model_inputs(pad_id))
  trainer.with_loss_fn(token_loss)
  done = trainer.train_steps
  if done:
    log(f"explorer SFT: resuming after step {done} of {steps}")
  data = batches(rows, batch_size, pad_id, seed)
  if mesh is not None:   # each process places its rows of every batch
    sharding = NamedSharding(mesh, P("fsdp"))
    local = parallel.process_rows(batch_size)
    data = ({k: jax.make_array_from_process_local_data(
        sharding, v[local], v.shape) for k, v in b.items()} for b in data)
  with (mesh if mesh is not None else contextlib.nullcontext()), \
      causal_lm.rope_theta_of(model):
    trainer.train(data)
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
