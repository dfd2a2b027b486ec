"""The HyGRL training run: calibrate the heuristic fusion once, then the
imitation stage, then the RL stage (SCST + margin), checkpointed like the
walker's run (``train(config, data_dir, workdir)`` resumes exactly)."""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import numpy as np

from racer_jax.hygrl import heuristics
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl import update as hygrl_update
from racer_jax.hygrl.mentors import (LLMJudgements, llm_roles, role_backend,
                                     role_names)
from racer_jax.hygrl.retrieval_eval import run_retrieval_eval
from racer_jax.hygrl.state import create_state, hygrl_config
from racer_jax.runs import parallel
from racer_jax.runs.builders import start_run
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.update_loop import run_stage_updates


def calibrate(config, dataset, concept_emb, log=print,
              with_choice: bool | None = None) -> np.ndarray:
  """θ of the fusion, fitted on the first-step candidates of a seeded
  random ``hygrl.calibration_questions`` questions (the first batches of a
  ``config.seed`` shuffle; label: on a shortest path from
  a question concept to the gold answer); one weight per metric of
  :func:`hygrl.fusion_metrics` (``with_choice``: whether "grounds a
  choice" is among them; default ``hygrl.heuristic_choice``)."""
  cfg = hygrl_config(config)
  if with_choice is not None:
    cfg = dataclasses.replace(cfg, heuristic_choice=with_choice)
  fn = jax.jit(lambda b, c: hygrl.calibration_batch(b, c, cfg))

  def parts():
    seen, size = 0, config.batch.batch_size
    for step in range(dataset.batches_per_epoch(size)):
      batch = dataset.batch_for_step(step, config.seed, size)
      yield (*jax.device_get(fn(batch, concept_emb)),
             int(batch.example_mask.sum()))
      seen += int(batch.example_mask.sum())
      if seen >= config.hygrl.calibration_questions:
        break

  return fit_fusion(parts(), cfg, log)


def fit_fusion(parts, cfg, log=print) -> np.ndarray:
  """θ fitted on ``parts``: ``(metrics [B, N, M], labels [B, N], mask [B,
  N], questions)`` of calibration batches (host arrays)."""
  metrics, labels, seen = [], [], 0
  for m, lab, mask, questions in parts:
    metrics.append(m[mask])
    labels.append(lab[mask])
    seen += questions
  metrics, labels = np.concatenate(metrics), np.concatenate(labels)
  if not len(labels):
    raise ValueError("no labeled candidates to calibrate the fusion on")
  theta = np.asarray(heuristics.calibrate_fusion(metrics, labels))
  weights = np.asarray(jax.nn.softmax(theta))
  shown = dict(zip(hygrl.fusion_metrics(cfg), weights.round(3).tolist()))
  log(f"fusion weights over {shown} "
      f"from {len(labels):,} candidates of {seen} questions "
      f"({labels.mean():.1%} positive)")
  return theta


def llm_judgements(config, ws, workdir, log):
  """``(LLMJudgements, UsageReport)`` when ``hygrl.mentor`` or
  ``hygrl.judge`` is ``llm`` (backend from ``config.agents``, key from the
  environment, responses cached in the workdir), else ``(None, None)``."""
  found = role_backend(config, workdir, log)
  if found is None:
    return None, None
  backend, usage = found
  mentor, judge = llm_roles(config)
  h = config.hygrl
  return LLMJudgements(backend, ws.kg, usage, mentor=mentor, judge=judge,
                       pairs_per_question=h.llm_pairs_per_question), usage


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print,
          stop_after: int | None = None) -> dict:
  """Imitation then RL; returns the last logged metrics."""
  workdir, ws, eval_split = start_run(config, data_dir, workdir,
                                      progress=progress, log=log)
  t, h = config.train, config.hygrl
  dataset = ws.splits[t.split].dataset
  policy, optimizer, state = create_state(config, ws.concept_emb.shape[1])
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state, record, _ = restored
    theta = np.asarray(record["theta"], np.float32)
    log(f"resuming from step {int(state.step)}")
  else:
    theta = calibrate(config, dataset, ws.concept_emb, log)
  start, total = int(state.step), h.imitation_steps + h.rl_steps
  mesh = parallel.make_mesh(t.num_devices)
  state = parallel.replicate(mesh, state)
  concept_emb = parallel.replicate(mesh, ws.concept_emb)
  theta_dev = parallel.replicate(mesh, theta)
  cfg = hygrl_config(config)
  programs = {stage: hygrl_update.make_hygrl_step(policy, optimizer, cfg, stage)
              for stage in ("imitation", "rl")}
  judgements, usage = llm_judgements(config, ws, workdir, log)
  propose = hygrl_update.make_rl_proposal(policy, cfg) if judgements else None
  examples = ws.splits[t.split].examples
  evaluate_fn = hygrl.make_retrieval_eval(policy, cfg)
  bs = config.batch.batch_size

  def one_update(state, step):
    host_batch = dataset.batch_for_step(step, config.seed, bs)
    batch = parallel.shard_batch(mesh, host_batch)
    stage = "imitation" if step < h.imitation_steps else "rl"
    if stage == "rl" and judgements is not None:
      proposal = jax.device_get(propose(state, batch, concept_emb,
                                        theta_dev))
      external = parallel.shard_batch(mesh, judgements.external(
          host_batch, examples, proposal))
      state, metrics = programs[stage](state, batch, concept_emb, theta_dev,
                                       external)
    else:
      state, metrics = programs[stage](state, batch, concept_emb, theta_dev)
    metrics = {k: metrics.get(k, 0.0) for k in (
        "loss", "finite", "grad_norm", "labels", "scst_loss", "margin_loss",
        "reward_sample", "reward_greedy")}
    return state, metrics

  def evaluate(state, step):
    del step
    return run_retrieval_eval(evaluate_fn, state.params,
                              ws.splits[eval_split], concept_emb, theta_dev,
                              config.eval.batch_size)

  _, last, _ = run_stage_updates(
      state, one_update, config=config, workdir=workdir, ckpt=ckpt,
      start=start, total=total, stop_after=stop_after,
      record=lambda done: {
          "theta": theta.tolist(),
          "stage": "imitation" if done <= h.imitation_steps else "rl",
          "llm": usage.to_dict() if usage else None,
          "roles": role_names(config)},
      evaluate=evaluate if t.eval_every else None, eval_every=t.eval_every,
      progress=progress, desc="train hygrl")
  return last
