"""The explorer's RL run on the host: each update draws its questions
(the paper's easy-to-hard sampler, or uniform for vanilla PPO), samples
one episode per question (GRPO: ``grpo_group_size`` each) from the current
policy (batched, :mod:`racer_jax.graphdancer.rollout`), scores them with
GraphDancer's reward and takes one update of actor and critic
(:mod:`racer_jax.graphdancer.update`).

Sequences are padded to a few fixed lengths (the prompt's, fixed for the
run; the response's, one of :data:`~racer_jax.graphdancer.inputs.
LENGTH_BUCKETS` up to the context cap)
so that the jitted passes compile a handful of times, not once per batch.

Data parallel over ``train.num_devices`` devices and over processes: the
models are replicated over the mesh, every micro-batch split over it; in a
multi-process run each process samples its own share of every batch
(:func:`racer_jax.runs.parallel.process_rows`) and only the first writes
the metrics.

The models and optimizer states are saved with orbax every
``checkpoint_every`` updates under ``<workdir>/ppo``; the batch of update
``t`` and its sampling seed are functions of ``(seed, t)``, so a stopped
run resumes exactly. One JSON line per update goes to
``<workdir>/ppo_metrics.jsonl``, with the rollout's and the update's wall
time and the sampled tokens per second of the rollout.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Sequence

import jax
import numpy as np
import optax
import orbax.checkpoint as ocp
import tqdm
from flax import nnx
from jax.experimental import multihost_utils

from racer_jax.data.curriculum import EasyToHard, draw_batch
from racer_jax.errors import bars_off
from racer_jax.graphdancer import model as model_lib
from racer_jax.graphdancer.episode import RewardWeights, reward
from racer_jax.graphdancer.inputs import length_bucket
from racer_jax.graphdancer.rollout import Rollout
from racer_jax.graphdancer.update import (GRPOUpdate, PPOSettings,
                                          PPOUpdate, group_advantages,
                                          local_view, sequences)
from racer_jax.lm import causal_lm
from racer_jax.runs import distributed, parallel

def _global_max(n: int) -> int:
  if jax.process_count() == 1:
    return int(n)
  return int(np.max(multihost_utils.process_allgather(np.int32(n))))


def _global(values: Sequence[float]) -> np.ndarray:
  """float32 [global batch]: every process's values, in process order."""
  local = np.asarray(values, np.float32)
  if jax.process_count() == 1:
    return local
  return np.asarray(multihost_utils.process_allgather(local, tiled=True))


def sampler_of(config) -> EasyToHard | None:
  g = config.graphdancer
  if g.curriculum == "uniform":
    return None
  return EasyToHard(beta=g.e2h_beta, sigma=g.e2h_sigma,
                    eta_start=g.e2h_eta[0], eta_end=g.e2h_eta[-1],
                    bias=tuple(g.e2h_bias))


def reward_weights(config) -> RewardWeights:
  g = config.graphdancer
  return RewardWeights(g.reward_structure, g.reward_final_format,
                       g.reward_retrieval)


class PPORun:
  """Actor (from ``lm``, the warm-started explorer), its frozen reference,
  the critic (``lm``'s transformer and a value head; none with GRPO) and
  their optimizers, replicated over a mesh of ``train.num_devices``
  devices, restored from ``checkpoint_dir`` when it holds a save."""

  def __init__(self, config, lm, checkpoint_dir: Path):
    g = config.graphdancer
    copy = lambda: nnx.merge(lm.graphdef, jax.tree.map(lambda x: x,
                                                       lm.state))
    self.lm, self.config = lm, config
    self.sampling_graphdef = causal_lm.sampling_graphdef(lm)
    self.mesh = parallel.make_mesh(config.train.num_devices)
    devices = self.mesh.devices.size
    self.group_size = g.grpo_group_size if g.algorithm == "grpo" else 1
    episodes = g.ppo_batch_size * self.group_size
    micro = min(g.ppo_micro_batch_size or episodes, episodes)
    if episodes % micro or micro % devices or micro % jax.process_count():
      raise ValueError(
          f"graphdancer: {episodes} episodes per update (ppo_batch_size x "
          f"grpo_group_size) in micro-batches of {micro} over {devices} "
          f"devices and {jax.process_count()} processes: the micro-batch "
          "must divide the batch and be a multiple of both")
    settings = PPOSettings(kl_coef=g.kl_coef, clip_ratio=g.clip_ratio)
    common = dict(actor_tx=optax.adamw(g.actor_learning_rate,
                                       weight_decay=g.weight_decay),
                  settings=settings, pad_id=lm.tokenizer.pad_id,
                  eos_id=lm.tokenizer.eos_id, micro_batch_size=micro,
                  mesh=self.mesh)
    if g.algorithm == "grpo":
      self.ppo = GRPOUpdate(copy(), copy(), group_size=self.group_size,
                            temperature=g.rollout_temperature, **common)
    else:
      self.ppo = PPOUpdate(
          copy(), model_lib.critic_of(lm, config.seed), copy(),
          critic_tx=optax.adamw(g.critic_learning_rate,
                                weight_decay=g.weight_decay), **common)
    self.manager = ocp.CheckpointManager(
        Path(checkpoint_dir).resolve(),
        options=ocp.CheckpointManagerOptions(max_to_keep=2, create=True))
    self.step = 0
    latest = self.manager.latest_step()
    if latest is not None:
      restored = self.manager.restore(
          latest, args=ocp.args.StandardRestore(self._state()))
      for name, module in self._modules().items():
        nnx.update(module, restored[name])
      self.step = int(latest)

  def _modules(self) -> dict:
    p = self.ppo
    modules = {"actor": p.actor, "actor_opt": p.actor_opt}
    if isinstance(p, PPOUpdate):
      modules.update(critic=p.critic, critic_opt=p.critic_opt)
    return modules

  def _state(self) -> dict:
    return {k: nnx.state(m) for k, m in self._modules().items()}

  def save(self) -> None:
    self.manager.save(self.step, args=ocp.args.StandardSave(self._state()))
    self.manager.wait_until_finished()

  def policy(self) -> nnx.Module:
    """The actor as the sampler reads it (one device's copy, without
    rematerialization)."""
    return local_view(self.ppo.actor, self.sampling_graphdef)


def train(config, run: PPORun, env, system: str, questions: Sequence,
          group_of: np.ndarray, workdir: Path, *, progress: bool = True,
          log: Callable[[str], None] = print) -> dict:
  """RL updates ``run.step .. ppo_steps``; ``questions``: ``(question,
  choices, golds)`` of the training questions, ``group_of`` their
  curriculum groups (0 easy, 1 medium, 2 hard). Returns the last update's
  figures."""
  g = config.graphdancer
  sampler, weights = sampler_of(config), reward_weights(config)
  rollout = Rollout(run.lm, env, system, max_step_tokens=g.max_step_tokens,
                    max_context_tokens=g.max_context_tokens,
                    model=run.policy())
  pad_id = run.lm.tokenizer.pad_id
  prompt_len = length_bucket(max(rollout.start(*q).prompt_length
                                 for q in questions))
  primary = distributed.is_primary()
  metrics_path = Path(workdir) / "ppo_metrics.jsonl"
  if primary and metrics_path.exists():   # updates after the last save
    kept = [line for line in metrics_path.read_text().splitlines()
            if line and json.loads(line)["step"] <= run.step]
    metrics_path.write_text("".join(k + "\n" for k in kept))
  last = {}
  with tqdm.tqdm(total=g.ppo_steps, initial=run.step, desc="explorer RL",
                 disable=not progress or not primary or bars_off()) as bar:
    while run.step < g.ppo_steps:
      t = run.step
      drawn = draw_batch(group_of, g.ppo_batch_size, t, g.ppo_steps,
                         config.seed, sampler)
      episodes = np.repeat(drawn, run.group_size)
      mine = episodes[parallel.process_rows(len(episodes))]
      started = time.perf_counter()
      rollout.generator.load(run.policy())
      runs = rollout.run([questions[i] for i in mine],
                         temperature=g.rollout_temperature,
                         seed=config.seed * 100_003 + t)
      rolled = time.perf_counter()
      rewards = [reward(r.episode.response, r.episode.golds, weights)
                 for r in runs]
      everyone = _global(rewards)
      completion_len = length_bucket(_global_max(max(
          len(r.ids) - r.prompt_length for r in runs)))
      seqs = sequences(runs, pad_id, prompt_len, completion_len)
      if run.group_size > 1:
        adv = group_advantages(everyone, run.group_size)
        batch = run.ppo.batch(*seqs, adv[parallel.process_rows(len(adv))])
      else:
        batch = run.ppo.batch(*seqs, rewards)
      figures = run.ppo.update(batch)
      sampled = float(_global([sum(sum(r.mask) for r in runs)]).sum())
      last = {"step": t + 1, **figures,
              "rollout_seconds": rolled - started,
              "update_seconds": time.perf_counter() - rolled,
              "sampled_tokens_per_second": sampled / max(rolled - started,
                                                         1e-9),
              "reward": float(np.mean(everyone)),
              "answered": float(np.mean(_global(
                  [r.episode.end == "answer" for r in runs]))),
              "groups": [int((group_of[drawn] == k).sum()) for k in range(3)],
              "sequence_lengths": [prompt_len, completion_len]}
      run.step = t + 1
      if primary:
        with open(metrics_path, "a", encoding="utf-8") as f:
          f.write(json.dumps(last) + "\n")
          f.flush()
          os.fsync(f.fileno())
      if run.step % g.checkpoint_every == 0 or run.step == g.ppo_steps:
        run.save()
      bar.set_postfix(reward=f"{last['reward']:.3f}")
      bar.update()
  if last:
    log(f"explorer {g.algorithm.upper()}: update {last['step']}: {last}")
  return last
