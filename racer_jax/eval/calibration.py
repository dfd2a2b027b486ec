"""The critic's thresholds, fitted where labels are allowed.

The local critic ACCEPTs an answer whose probability and path support pass
two thresholds (:class:`~racer_jax.agents.critic.LocalCritic`). They are
fitted by Youden's J on a one-round pass of the agents' loop over the answer
run's **validation slice** — training questions the answer model never
trained on (:mod:`racer_jax.data.validation`) — with the retrieval, memory
and AnswerAgent the evaluation will use, and stored with the run
(``<workdir>/calibration/<key>/``: the pass's per-question JSONL, resumable,
and ``critic.json``). An evaluation loads them and never fits on the split
it scores; ``calibrate_after_training`` runs at the end of the answer stage
(after the optional memory pass over the training split, so the thresholds
see the memory evaluation starts from).

``legacy_twofold`` is the old protocol, for runs trained before validation
slices existed and only behind ``--legacy_critic_calibration``: thresholds
fitted two-fold on the evaluated split's own labels (no question judged by
thresholds fitted on its own label, but the test labels shape the critic).
"""

from __future__ import annotations

from typing import Callable

import ml_collections
import numpy as np
import scipy.stats

from racer_jax.agents import critic as critic_lib
from racer_jax.agents.agent_loop import FoldCritic
from racer_jax.agents.critic import LocalCritic
from racer_jax.agents.stack import AgentStack
from racer_jax.runs.workspace import subset
from racer_jax.eval import memory_pass, passes, paths_choice

VALIDATION = "validation"
TWOFOLD = "twofold_eval_split"


def fit_on_records(records: list[dict]) -> tuple[LocalCritic, dict]:
  """The critic fitted on a one-round pass's records, and its figures on
  them (accepted fraction, accuracy of the accepted and the rest)."""
  conf = np.array([r["rounds"][0]["confidence"] for r in records])
  support = np.array([r["rounds"][0]["support"] for r in records])
  correct = np.array([bool(r["correct"]) for r in records])
  critic = LocalCritic.calibrate(conf, support, correct)
  accept = (conf >= critic.min_confidence) & (support >= critic.min_support)
  mean = lambda x: float(np.mean(x)) if x.size else None
  return critic, {
      "questions": len(records), "one_round_accuracy": mean(correct),
      "accepted_fraction": mean(accept),
      "accepted_accuracy": mean(correct[accept]),
      "rejected_accuracy": mean(correct[~accept]),
      "youden_j": (mean(accept[correct]) or 0.0) -
                  (mean(accept[~correct]) or 0.0)}


def fit_critic(stack: AgentStack, *, progress: bool = True,
               log: Callable[[str], None] = print) -> dict:
  """The validation calibration for ``stack``'s setup: the stored record,
  or a one-round pass over the validation slice (local models; resumed
  after a crash), the fit, and the record stored. Returns the record
  (``thresholds``, ``figures``, ``critic_calibration``, ``file``)."""
  identity = stack.calibration_identity()
  done = critic_lib.stored_calibration(stack.workdir, identity)
  if done is not None:
    return done
  data = stack.validation()
  folder = critic_lib.calibration_folder(stack.workdir, identity)
  folder.mkdir(parents=True, exist_ok=True)
  n = data.dataset.num_questions
  log(f"calibrating the critic on the validation slice ({n} training "
      f"questions held out of answer training; memory: "
      f"{identity['memory_source']})")
  result = passes.run_pass(
      stack.collaboration(data, LocalCritic(0.0, 0.0), 1, local_only=True),
      data, batch_size=stack.config.eval.batch_size, seed=stack.config.seed,
      path=folder / "validation.jsonl", resume=True, progress=progress,
      desc="critic calibration (validation)")
  records = [r for r in result.records if r.get("correct") is not None]
  if not records:
    raise ValueError(f"{stack.workdir}: the validation slice has no labeled "
                     "question to calibrate the critic on")
  critic, figures = fit_on_records(records)
  figures["retrieval_trained_on_validation"] = stack.retrieval_saw_validation()
  if figures["retrieval_trained_on_validation"]:
    log("critic calibration: the walker or refiner run trained on these "
        "validation questions (it predates held-out slices or holds out "
        "another), so their paths are better than on unseen questions and "
        "the thresholds are fitted on easier data")
  record = {"critic_calibration": VALIDATION,
            "thresholds": {"min_confidence": critic.min_confidence,
                           "min_support": critic.min_support},
            "figures": figures}
  path = critic_lib.write_calibration(stack.workdir, identity, record)
  log(f"critic: ACCEPT at p ≥ {critic.min_confidence:.3f} and support "
      f"{critic_lib.support_rule(critic.min_support)} (validation: "
      f"{figures['accepted_fraction']:.1%} accepted) -> {path}")
  return {**record, "identity": identity, "file": str(path)}


def legacy_twofold(one_round: list[dict]) -> tuple[FoldCritic, dict]:
  """``(FoldCritic, thresholds)`` fitted two-fold on the evaluated split's
  no-critic pass: questions with an even index are judged by the critic
  fitted on the odd ones and vice versa (``--legacy_critic_calibration``)."""
  odd = np.array([r["index"] % 2 == 1 for r in one_round], bool)
  on_odd, _ = fit_on_records([r for r, o in zip(one_round, odd) if o])
  on_even, _ = fit_on_records([r for r, o in zip(one_round, odd) if not o])
  fitted = {"even": [on_odd.min_confidence, on_odd.min_support],
            "odd": [on_even.min_confidence, on_even.min_support]}
  return FoldCritic(even=on_odd, odd=on_even), fitted


def calibrate_after_training(config, data_dir, workdir, *,
                             progress: bool = True,
                             log: Callable[[str], None] = print
                             ) -> dict | None:
  """The end of the answer stage: k' chosen on the validation slice
  (:mod:`racer_jax.eval.paths_choice`), the optional memory pass over the
  training split (``agents.memory_from_train``), then the critic fitted on
  the validation slice with the memory evaluation starts from. Local
  models only (no LLM spend while training). None when the run names no
  retrieval (the critic is then calibrated by the first evaluation that
  gives one, ``--retrieval_workdir``) or keeps no validation slice."""
  agents = ml_collections.ConfigDict(config.agents.to_dict())
  agents.backend = "local"
  if not (config.answer.knowledge_workdir or
          config.answer.evidence_workdir or
          config.answer.graph_workdir or
          agents.retrieval_workdir):
    log("critic calibration: this answer run names no retrieval run; an "
        "evaluation with --retrieval_workdir calibrates it on the "
        "validation slice")
    return None
  if not config.answer.validation_fraction:
    log("critic calibration: no validation slice (answer.validation_fraction"
        "=0); evaluations of this run need --legacy_critic_calibration")
    return None
  stack = AgentStack(config, data_dir, workdir, agents=agents,
                     progress=progress, log=log)
  # k' first: the memory pass and the critic then see the paths evaluations
  # will show
  chosen = paths_choice.choose(stack, progress=progress, log=log)
  if agents.memory_from_train and stack.train_memory is None:
    preliminary = fit_critic(stack, progress=progress, log=log)
    memory_pass.build_train_memory(
        stack, critic_lib.critic_of(preliminary),
        limit=int(agents.memory_train_questions),
        progress=progress, log=log)
  elif chosen is not None:
    paths_choice.share_chosen_pass(stack, chosen, log=log)
  return fit_critic(stack, progress=progress, log=log)


def score_critic_identity(stack: AgentStack) -> dict:
  """What a fit of the scoring critic depends on: the local critic's
  identity plus the scorer, the metric, what is shown and how many
  validation questions."""
  agents = stack.agents
  return {**stack.calibration_identity(), "critic": "score",
          "scorer": stack.scorer().name,
          "score_metric": agents.score_metric,
          "show_paths": bool(agents.show_paths),
          "questions": int(agents.score_critic_questions)}


def fit_score_critic(stack: AgentStack, *, progress: bool = True,
                     log: Callable[[str], None] = print) -> dict:
  """The scoring critic's P(ACCEPT) threshold (``agents.answer_mode=score``)
  fitted by Youden's J on a one-round pass of the score-mode Answer and
  Critic over the first ``agents.score_critic_questions`` questions of the
  validation slice (0: all; the slice is a seeded random draw of the
  training split). Stored, and resumed, like :func:`fit_critic`; also
  stores the ROC AUC of P(ACCEPT) against the answer being right (0.5: the
  critic tells nothing). Sets the threshold on ``stack``."""
  identity = score_critic_identity(stack)
  done = critic_lib.stored_calibration(stack.workdir, identity)
  if done is None:
    data = stack.validation()
    if identity["questions"] > 0:
      data = subset(data, data.dataset.ids[:identity["questions"]],
                    stack.rconfig)
    folder = critic_lib.calibration_folder(stack.workdir, identity)
    folder.mkdir(parents=True, exist_ok=True)
    log(f"calibrating the scoring critic on {data.dataset.num_questions} "
        f"validation questions ({identity['scorer']})")
    result = passes.run_pass(
        stack.collaboration(data, LocalCritic(0.0, 0.0), 1,
                            record_score_critic=True), data,
        batch_size=stack.config.eval.batch_size, seed=stack.config.seed,
        path=folder / "validation.score.jsonl", resume=True,
        progress=progress, desc="scoring critic calibration (validation)")
    records = [r for r in result.records if r.get("correct") is not None]
    if not records:
      raise ValueError(f"{stack.workdir}: the validation slice has no "
                       "labeled question to calibrate the critic on")
    p_accept = np.array([r["rounds"][0]["critic_confidence"]
                         for r in records])
    correct = np.array([bool(r["correct"]) for r in records])
    threshold = LocalCritic.calibrate(p_accept, np.zeros_like(p_accept),
                                      correct).min_confidence
    accept = p_accept >= threshold
    mean = lambda x: float(np.mean(x)) if x.size else None
    figures = {
        "questions": len(records), "one_round_accuracy": mean(correct),
        "accepted_fraction": mean(accept),
        "accepted_accuracy": mean(correct[accept]),
        "rejected_accuracy": mean(correct[~accept]),
        "youden_j": (mean(accept[correct]) or 0.0) -
                    (mean(accept[~correct]) or 0.0),
        "p_accept_auc": roc_auc(p_accept, correct),
        "p_accept_mean": mean(p_accept)}
    record = {"critic_calibration": VALIDATION,
              "thresholds": {"min_accept": float(threshold)},
              "figures": figures}
    path = critic_lib.write_calibration(stack.workdir, identity, record)
    log(f"scoring critic: ACCEPT at P(ACCEPT) ≥ {threshold:.3f} "
        f"(validation: {figures['accepted_fraction']:.1%} accepted, "
        f"AUC {figures['p_accept_auc']}) -> {path}")
    done = {**record, "identity": identity, "file": str(path)}
  stack.score_critic_min_accept = float(done["thresholds"]["min_accept"])
  return done


def roc_auc(scores, positive) -> float | None:
  """The probability that a positive outscores a negative (ties half):
  the Mann-Whitney U over the product of the class sizes."""
  positive = np.asarray(positive, bool)
  if positive.all() or not positive.any():
    return None
  u = scipy.stats.mannwhitneyu(np.asarray(scores)[positive],
                               np.asarray(scores)[~positive]).statistic
  return float(u / (positive.sum() * (~positive).sum()))
