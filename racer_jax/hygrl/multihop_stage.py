"""HyGRL's training run in its own setting (``method=hygrl_multihop``):
calibrate the heuristic fusion on training questions, imitation (BCE,
AdamW with a plateau schedule), then SCST + margin ranking (Adam), over
the passage graph. Checkpointed and resumed exactly like the other runs.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from racer_jax.hygrl import multihop_budget, multihop_eval, multihop_relevance
from racer_jax.hygrl import passages as hygrl_passages
from racer_jax.hygrl import update as hygrl_update
from racer_jax.hygrl.mentors import (
  PassageJudgements,
  llm_roles,
  role_backend,
  role_names,
)
from racer_jax.hygrl.multihop_state import create_state, prep_dir, train_rows
from racer_jax.hygrl.multihop_workspace import MultiHopWorkspace, prepare
from racer_jax.hygrl.stage import fit_fusion
from racer_jax.hygrl.state import hygrl_config
from racer_jax.runs import run_config
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.update_loop import run_stage_updates

STAGE = "hygrl_multihop"


def calibration_rows(config, rows) -> np.ndarray:
  """A seeded random ``hygrl.calibration_questions`` of the training
  ``rows`` (``config.seed``), in their order."""
  rng = np.random.default_rng([int(config.seed), 0xca11b])
  n = min(int(config.hygrl.calibration_questions), len(rows))
  return np.sort(rng.choice(np.asarray(rows), size=n, replace=False))


def calibrate(config, ws: MultiHopWorkspace, rows, log=print) -> np.ndarray:
  """θ of the fusion from the first-step candidates of a seeded random
  ``hygrl.calibration_questions`` of the training questions."""
  cfg = hygrl_config(config)
  fn = jax.jit(lambda b, v: hygrl_passages.calibration_batch(b, v, cfg))
  rows = calibration_rows(config, rows)
  size = config.eval.batch_size
  parts = ((*jax.device_get(fn(ws.batch(rows[i:i + size], size),
                               ws.node_vecs)), len(rows[i:i + size]))
           for i in range(0, len(rows), size))
  return fit_fusion(parts, cfg, log)


def batch_rows(rows: np.ndarray, step: int, seed: int, size: int):
  """The rows of update ``step``: epochs of a seeded shuffle (the same on
  resume)."""
  per_epoch = max(1, math.ceil(len(rows) / size))
  epoch, i = divmod(step, per_epoch)
  order = np.random.default_rng([seed, epoch]).permutation(rows)
  return order[i * size:(i + 1) * size]


def llm_judgements(config, workdir, ws, log):
  """``(PassageJudgements, UsageReport)`` when ``hygrl.mentor`` or
  ``hygrl.judge`` is ``llm`` (the backend of ``config.agents``, replies
  cached in the workdir), else ``(None, None)``."""
  found = role_backend(config, workdir, log)
  if found is None:
    return None, None
  backend, usage = found
  mentor, judge = llm_roles(config)
  h = config.hygrl
  return PassageJudgements(
      backend, ws.graph, ws.data.texts, usage, mentor=mentor, judge=judge,
      pairs_per_question=h.llm_pairs_per_question), usage


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print,
          stop_after: int | None = None) -> dict:
  """Calibration, imitation then RL; returns the last logged metrics."""
  h = config.hygrl
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  run_config.save(config, workdir, STAGE)
  ws = prepare(config, data_dir, prep_dir(config, workdir), log=log,
               progress=progress)
  rows = train_rows(config, ws)
  reranker = multihop_relevance.add_relevance(
      config, ws, workdir, rows, train=True, progress=progress, log=log)
  bs = config.batch.batch_size
  per_epoch = max(1, math.ceil(len(rows) / bs))
  policy, optimizer, state = create_state(config, ws.node_vecs.shape[1],
                                          per_epoch)
  ckpt = Checkpointer(workdir / "checkpoints", config.train.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  rl_tau = [None]  # the policy's τ in the RL stage (fitted at its start)
  if restored is not None:
    state, record, _ = restored
    theta = np.asarray(record["theta"], np.float32)
    rl_tau[0] = record.get("rl_policy_tau")
    log(f"resuming from step {int(state.step)}")
  else:
    theta = calibrate(config, ws, rows, log)
  cfg = hygrl_config(config)

  def program(stage, tau=None):
    c = cfg if tau is None else dataclasses.replace(
        cfg, beam=dataclasses.replace(cfg.beam, tau=float(tau)))
    return hygrl_update.make_hygrl_step(
        policy, optimizer, c, stage,
        inputs_fn=hygrl_passages.passage_inputs, pass_loss=True)

  programs = {"imitation": program("imitation")}
  judgements, usage = llm_judgements(config, workdir, ws, log)
  tables = multihop_relevance.search_tables(config, ws, reranker)
  theta_dev = jax.device_put(theta)
  log(f"training on {len(rows)} questions, {per_epoch} updates per epoch")

  def one_update(state, step):
    batch = ws.batch(batch_rows(rows, step, config.seed, bs), bs)
    stage = "imitation" if step < h.imitation_steps else "rl"
    if stage == "rl" and "rl" not in programs:
      if rl_tau[0] is None and config.multihop.fit_policy_tau:
        # RL searches at the heuristic's node budget (fitted on the
        # training questions with the imitated policy)
        rl_tau[0], fit = multihop_budget.fit_policy_tau(
            multihop_eval.BeamRetriever, config, ws, state.params, theta,
            rows, config.eval.batch_size, tables)
        log(f"RL stage: policy τ = {rl_tau[0]} (adds "
            f"{fit['policy_nodes_added_train']:.2f} nodes, the heuristic "
            f"{fit['heuristic_nodes_added_train']:.2f})")
      programs["rl"] = program("rl", rl_tau[0])
      if judgements is not None:
        programs["propose"] = hygrl_update.make_rl_proposal(
            policy, dataclasses.replace(cfg, beam=dataclasses.replace(
                cfg.beam, tau=float(rl_tau[0] or cfg.beam.tau))),
            inputs_fn=hygrl_passages.passage_inputs)
    if stage == "rl" and judgements is not None:
      proposal = jax.device_get(programs["propose"](state, batch, tables,
                                                    theta_dev))
      shown = [(ws.data.questions[i].question, ws.data.questions[i].answer)
               for i in batch_rows(rows, step, config.seed, bs)]
      external = judgements.external(batch, shown, proposal)
      state, metrics = programs[stage](state, batch, tables, theta_dev,
                                       external)
    else:
      state, metrics = programs[stage](state, batch, tables, theta_dev)
    metrics = {k: metrics.get(k, 0.0) for k in (
        "loss", "finite", "grad_norm", "labels", "scst_loss", "margin_loss",
        "reward_sample", "reward_greedy")}
    # a copy: the state is donated to the next update
    metrics["lr_scale"] = float(hygrl_update.plateau_lr_scale(state.opt_state))
    return state, metrics

  state, last, finished = run_stage_updates(
      state, one_update, config=config, workdir=workdir, ckpt=ckpt,
      start=int(state.step), total=h.imitation_steps + h.rl_steps,
      stop_after=stop_after,
      record=lambda done: {
          "theta": theta.tolist(), "rl_policy_tau": rl_tau[0],
          "llm": usage.to_dict() if usage else None,
          "roles": role_names(config),
          "stage": "imitation" if done <= h.imitation_steps else "rl"},
      progress=progress, desc="train hygrl (multi-hop)")
  if finished:
    last["policy_tau"] = multihop_budget.chosen_policy_tau(
        multihop_eval.BeamRetriever, config, workdir, ws, state.params,
        theta, log=log, tables=tables)
  return last
