"""The explorer's PPO run on the host: each update draws its questions
(the paper's easy-to-hard sampler, or uniform for vanilla PPO), samples
one episode per question from the current policy (batched,
:mod:`racer_jax.graphdancer.rollout`), scores them with GraphDancer's
reward and takes one jitted PPO update of actor and critic
(:mod:`racer_jax.graphdancer.update`).

The actor, critic and both optimizer states are saved with orbax every
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

from racer_jax.data.curriculum import EasyToHard, draw_batch
from racer_jax.errors import bars_off
from racer_jax.graphdancer import model as model_lib
from racer_jax.graphdancer.episode import RewardWeights, reward
from racer_jax.graphdancer.rollout import Rollout
from racer_jax.graphdancer.update import PPOSettings, PPOUpdate, sequences


def _round_up(n: int, multiple: int = 128) -> int:
  return max(multiple, -(-n // multiple) * multiple)


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
  the critic (``lm``'s transformer and a value head) and their
  optimizers, restored from ``checkpoint_dir`` when it holds a save."""

  def __init__(self, config, lm, checkpoint_dir: Path):
    g = config.graphdancer
    copy = lambda: nnx.merge(lm.graphdef, jax.tree.map(lambda x: x,
                                                       lm.state))
    self.lm, self.config = lm, config
    self.ppo = PPOUpdate(
        copy(), model_lib.critic_of(lm, config.seed), copy(),
        actor_tx=optax.adamw(g.actor_learning_rate,
                             weight_decay=g.weight_decay),
        critic_tx=optax.adamw(g.critic_learning_rate,
                              weight_decay=g.weight_decay),
        settings=PPOSettings(kl_coef=g.kl_coef, clip_ratio=g.clip_ratio),
        pad_id=lm.tokenizer.pad_id, eos_id=lm.tokenizer.eos_id,
        micro_batch_size=g.ppo_micro_batch_size)
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
    return {"actor": p.actor, "critic": p.critic, "actor_opt": p.actor_opt,
            "critic_opt": p.critic_opt}

  def _state(self) -> dict:
    return {k: nnx.state(m) for k, m in self._modules().items()}

  def save(self) -> None:
    self.manager.save(self.step, args=ocp.args.StandardSave(self._state()))
    self.manager.wait_until_finished()


def train(config, run: PPORun, env, system: str, questions: Sequence,
          group_of: np.ndarray, workdir: Path, *, progress: bool = True,
          log: Callable[[str], None] = print) -> dict:
  """PPO updates ``run.step .. ppo_steps``; ``questions``: ``(question,
  choices, golds)`` of the training questions, ``group_of`` their
  curriculum groups (0 easy, 1 medium, 2 hard). Returns the last update's
  figures."""
  g = config.graphdancer
  sampler, weights = sampler_of(config), reward_weights(config)
  rollout = Rollout(run.lm, env, system, max_step_tokens=g.max_step_tokens,
                    max_context_tokens=g.max_context_tokens,
                    model=run.ppo.actor)
  pad_id = run.lm.tokenizer.pad_id
  metrics_path = Path(workdir) / "ppo_metrics.jsonl"
  if metrics_path.exists():   # lines of updates after the last checkpoint
    kept = [line for line in metrics_path.read_text().splitlines()
            if line and json.loads(line)["step"] <= run.step]
    metrics_path.write_text("".join(k + "\n" for k in kept))
  last = {}
  with tqdm.tqdm(total=g.ppo_steps, initial=run.step, desc="explorer PPO",
                 disable=not progress or bars_off()) as bar:
    while run.step < g.ppo_steps:
      t = run.step
      rows = draw_batch(group_of, g.ppo_batch_size, t, g.ppo_steps,
                        config.seed, sampler)
      started = time.perf_counter()
      runs = rollout.run([questions[i] for i in rows],
                         temperature=g.rollout_temperature,
                         seed=config.seed * 100_003 + t)
      rolled = time.perf_counter()
      rewards = [reward(r.episode.response, r.episode.golds, weights)
                 for r in runs]
      prompt_len = _round_up(max(r.prompt_length for r in runs))
      completion_len = _round_up(max(len(r.ids) - r.prompt_length
                                     for r in runs))
      batch = run.ppo.batch(*sequences(runs, pad_id, prompt_len,
                                       completion_len), rewards)
      figures = run.ppo.update(batch)
      sampled = sum(sum(r.mask) for r in runs)
      last = {"step": t + 1, **figures,
              "rollout_seconds": rolled - started,
              "update_seconds": time.perf_counter() - rolled,
              "sampled_tokens_per_second": sampled / max(rolled - started,
                                                         1e-9),
              "reward": float(np.mean(rewards)),
              "answered": float(np.mean([r.episode.end == "answer"
                                         for r in runs])),
              "groups": [int((group_of[rows] == k).sum()) for k in range(3)]}
      run.step = t + 1
      with open(metrics_path, "a", encoding="utf-8") as f:
        f.write(json.dumps(last) + "\n")
        f.flush()
        os.fsync(f.fileno())
      if run.step % g.checkpoint_every == 0 or run.step == g.ppo_steps:
        run.save()
      bar.set_postfix(reward=f"{last['reward']:.3f}")
      bar.update()
  if last:
    log(f"explorer PPO: update {last['step']}: {last}")
  return last
