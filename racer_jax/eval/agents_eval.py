"""The evaluation runner of the four-agent system (issue: evaluation
harness), from an answer run's checkpoint.

The answer run (``--config.stage=answer``) names its retrieval stack
(``answer.knowledge_workdir``: a refiner run, which names its walker). On a
split (or any jsonl in the same format, ``eval_file``) and for each seed:

1. the pipeline without the critic (one round): the *no critic* row;
2. the full loop (critic, re-exploration, rejection counts in the memory);
3. with ``ablations``: the same loop with one part changed (see
   :data:`ABLATIONS`).

The protocol keeps every label of the evaluated split out of every answer
(``../shared/DESIGN.md``, evaluation protocol): the critic's thresholds
come from the answer run's validation slice of the *training* split
(:mod:`racer_jax.eval.calibration`; fitted once and stored with the run),
and the shared memory starts from what training left (the walker run's
counts, or the answer run's memory pass over the training split) and
changes during evaluation only by the critic's label-free UNSURE. Two
switches break the protocol on purpose, and the report's first line says
so: ``agents.learn_from_eval_labels`` (an online-learning study: the gold
answers of scored questions add success/failure counts that rerank later
ones) and ``legacy_critic_calibration`` (runs trained before validation
slices: thresholds fitted two-fold on the evaluated split). The figures
carry ``critic_calibration``, ``memory_source`` and
``memory_eval_label_updates`` (0 under the protocol).

Every pass is resumable (:mod:`racer_jax.eval.passes`). The run folder
``<workdir>/eval/<name>/`` holds one JSONL per pass and seed
(``full.seed<k>.jsonl``, ``no_critic.seed<k>.jsonl``, ...), ``metrics.json``
(also returned; the headline numbers are mean ± std over seeds, recomputed
from the JSONL by :mod:`racer_jax.eval.qa_metrics`) and ``report.md`` with its
pictures (:mod:`racer_jax.eval.report`).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Callable

import numpy as np

from racer_jax import machine
from racer_jax.agents.critic import LocalCritic, critic_of
from racer_jax.agents.graph_agent import GraphAgent
from racer_jax.agents.stack import AgentStack
from racer_jax.runs.workspace import subset
from racer_jax.eval import (calibration, head_only, llm_figures, passes,
                            paths_choice, report, resume_checks)
from racer_jax.eval import dry_run as dry_run_lib
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.eval import qa_metrics as metrics_lib
from racer_jax.runs import registry, workdir_lock

# name -> what changes (racer_jax.runs.registry.ABLATIONS).
ABLATIONS = registry.ABLATIONS


def _needs(name: str) -> str:
  what = ABLATIONS.get(name)
  return (f"its own run: --ablation_workdirs={name}=DIR (launch/main.py "
          f"--ablations trains it: {what.description})")


def headline_keys() -> tuple[str, ...]:
  """Every per-question figure (those declared when called), averaged over
  seeds and given per ablation."""
  return (*metrics_lib.FIGURES, *metrics_lib.EXPLORER_KEYS)


def evaluate(config, data_dir, workdir, *, split: str | None = None,
             eval_file: str | None = None, seeds: int = 1,
             resume: bool = False, baseline_workdir=None, agents=None,
             api_key=None, ablations=(), ablation_workdirs=None,
             ablation_seeds: int | None = None, ensemble=(),
             legacy_critic_calibration: bool = False,
             max_questions: int = 0, dry_run: bool = False,
             progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """See the module docstring. ``agents``: a config with ``backend``
  (``local`` | ``gemini`` | ``openai``), ``model``, ``base_url``,
  ``max_turns``, ... (default: ``config.agents``); ``ablations``: names from :data:`ABLATIONS`
  (``no_critic`` is always run), run for the first ``ablation_seeds``
  seeds (default: all); each ablation's delta is to the full system over
  the same seeds. ``ensemble``: more answer runs shown this run's triples
  and paths (their extra text may differ: each is shown its own); the
  AnswerAgent averages their choice probabilities with this run's
  (:class:`EnsembleAnswerer`) and the critic is calibrated on the
  ensemble's own validation answers. ``baseline_workdir``: an answer run
  trained without knowledge, or several (their ensemble), for
  ``accuracy_answer_head_only`` (default: this answerer shown nothing).
  ``legacy_critic_calibration``: the old two-fold fit on the evaluated
  split, for runs without a validation slice (said in the report).
  ``max_questions``: only the first N questions of the split (0: all);
  ``dry_run``: build and count the LLM prompts, send none
  (:mod:`racer_jax.eval.dry_run`; returns its counts)."""
  started = time.perf_counter()
  workdir = Path(workdir)
  agents = agents or config.agents
  ablation_workdirs = dict(ablation_workdirs or {})
  unknown = set(ablations) - set(ABLATIONS.names())
  if unknown:
    raise ValueError(f"unknown ablations {sorted(unknown)}; expected "
                     f"{sorted(ABLATIONS.names())}")
  split = split or config.eval.split
  if max_questions < 0:
    raise ValueError(f"--max_questions={max_questions}: must be >= 0")
  if dry_run and ablations and set(ablations) != {"no_critic"}:
    raise ValueError("--dry_run counts the full system's passes; run it "
                     "without --ablations")
  stack = AgentStack(config, data_dir, workdir, agents=agents,
                     dry_run=dry_run, ensemble=ensemble, api_key=api_key, split=split,
                     eval_file=eval_file, progress=progress, log=log)
  key, ws, local = stack.split_key, stack.ws, stack.local
  data = ws.splits[key]
  learn_labels = bool(agents.learn_from_eval_labels)
  # a study that breaks the protocol gets folders of its own: a resumed
  # pass never mixes protocols
  name = "".join([key, ".ensemble" if ensemble else "",
                  ".legacy_critic" if legacy_critic_calibration else "",
                  ".online_labels" if learn_labels else "",
                  llm_figures.folder_suffix(stack.llm_identity, agents),
                  f".first{max_questions}" if max_questions else ""])
  out_dir = workdir / "eval" / name
  out_dir.mkdir(parents=True, exist_ok=True)
  with workdir_lock.hold(out_dir, what="evaluation folder"):
    if ensemble:
      resume_checks.require_same(
          out_dir / "members.json", {"workdirs": local.workdirs,
                                     "steps": local.step}, resume, "ensemble")
    # the refiner's k' as chosen on the validation slice (chosen now if the
    # run names candidates and has not chosen yet)
    paths_choice.choose(stack, progress=progress, log=log)
    calibrated, score_critic = _calibrations(
        stack, data, key, agents, legacy_critic_calibration, dry_run,
        progress, log)
    if (stack.backend is not None and stack.few_shot() is not None and
        key == config.train.split):
      raise ValueError(f"split {key!r} is the training split the few-shot "
                       "examples come from: evaluate another split, or set "
                       "--config.agents.few_shot=0")
    if max_questions:
      data = subset(data, data.dataset.ids[:max_questions], stack.rconfig)
    if not dry_run:
      # the last run's report and figures go: a run stopped half-way must not
      # leave them beside its own records
      out = EvalOutput(workdir, name)
      resume_checks.require_same(out_dir / "llm.json", stack.llm_identity or
                                 {"backend": "local"}, resume, "LLM")
      resume_checks.require_same(out_dir / "work.json", resume_checks.work_of(
          stack, data, agents), resume, "work")
    else:
      figures = dry_run_lib.dry_run(stack, data, out_dir, seeds=seeds,
                                    max_turns=agents.max_turns,
                                    progress=progress, log=log)
      (out_dir / "dry_run.json").write_text(json.dumps(figures, indent=1))
      return figures

    passes_ = _Passes(stack, data, out_dir, resume=resume,
                      learn_labels=learn_labels,
                      ablation_workdirs=ablation_workdirs,
                      progress=progress, log=log)
    per_seed, skipped, thresholds = _seed_passes(
        passes_, calibrated, agents.max_turns, seeds, ablations,
        ablation_seeds)
    figures = summarize(per_seed, seeds,
                        trained_pruning="no_pruning" in ablation_workdirs)
    figures.update({
        "name": name, "split": split if not eval_file else None,
        "eval_file": str(Path(eval_file).resolve()) if eval_file else None,
        "eval_file_sha256": hashlib.sha256(Path(eval_file).read_bytes(
            )).hexdigest() if eval_file else None,
        **_setup_figures(stack, config, agents, figures),
        "triples_verified_fraction": verified_fraction(per_seed["full"][0]),
        **protocol_figures(per_seed, calibrated, stack.graph, learn_labels),
        "critic_thresholds": thresholds[0],
        **({"score_critic_min_accept": score_critic["thresholds"]["min_accept"],
            "score_critic_calibration": score_critic["figures"]}
           if score_critic else {}),
        "llm": stack.usage.to_dict(),
        "resumed_batches": passes_.resumed, "torn_lines_redone":
        passes_.torn, "ablations_skipped": skipped,
        "peak_rss_gb": metrics_lib.peak_rss_gb(),
        "peak_device_memory_gb": metrics_lib.peak_device_memory_gb(),
        "machine": machine.describe(), "wall_s": time.perf_counter() - started,
    })
    if ensemble:
      figures["answer_members"] = stack.members
      figures["answer_member_views"] = local.member_view
    evaluated = [data.examples[int(i)] for i in data.dataset.ids]
    if evaluated and evaluated[0].answer_index is not None:
      # over the questions evaluated (--max_questions: the first N), not the
      # whole split
      figures.update(head_only.head_only_figures(
          config, baseline_workdir, local, evaluated, per_seed["full"][0],
          log))
    return out.finish(figures, report=report.report_lines(
        out_dir, figures, config=config, workdir=workdir), log=log)


def _calibrations(stack, data, key: str, agents, legacy: bool,
                  dry_run: bool, progress: bool, log) -> tuple:
  """``(the critic's calibration record or None (legacy: fitted later on
  the evaluated split), the score-mode critic's or None)``, both fitted on
  the validation slice."""
  if legacy:
    return None, None
  calibrated = calibration.fit_critic(stack, progress=progress, log=log)
  _check_not_scored(stack, data, key)
  score_critic = None   # score mode: P(ACCEPT)'s threshold, fitted likewise
  if (stack.backend is not None and agents.max_turns > 1 and not dry_run
      and agents.answer_mode == "score"):
    score_critic = calibration.fit_score_critic(stack, progress=progress,
                                                log=log)
  return calibrated, score_critic


class _Passes:
  """The evaluation's passes of the agents' loop over ``data``, each into
  ``out_dir/<pass>.seed<i>.jsonl`` (resumed with ``resume``)."""

  def __init__(self, stack, data, out_dir: Path, *, resume: bool,
               learn_labels: bool, ablation_workdirs: dict,
               progress: bool, log: Callable[[str], None]):
    self.stack, self.data, self.out_dir = stack, data, out_dir
    self.resume, self.learn_labels = resume, learn_labels
    self.ablation_workdirs = ablation_workdirs
    self.progress, self.log = progress, log
    self.resumed = self.torn = 0
    self._variants = {}  # ablation -> its GraphAgent (reused per seed)

  def _concepts_of(self, result) -> None:
    sg, kg = self.data.subgraphs[result.index], self.stack.ws.kg
    result.choice_concepts = [
        [kg.concepts[int(c)] for c in sg.nodes[sg.choice_mask[:, j]]]
        for j in range(min(sg.choice_mask.shape[1], len(result.choices)))]

  def run(self, graph, critic, max_turns: int, pass_name: str,
          seed_index: int) -> list[dict]:
    """One pass's per-question records."""
    config = self.stack.config
    result = passes.run_pass(
        self.stack.collaboration(self.data, critic, max_turns, graph=graph,
                                 learn_from_labels=self.learn_labels),
        self.data, batch_size=config.eval.batch_size,
        seed=config.seed + 1000 * seed_index,
        path=self.out_dir / f"{pass_name}.seed{seed_index}.jsonl",
        resume=self.resume, annotate=self._concepts_of,
        progress=self.progress, desc=f"{pass_name} seed {seed_index}")
    self.resumed += result.resumed_batches
    self.torn += result.torn_lines
    return result.records

  def variant(self, name: str):
    """The GraphAgent of the ablation ``name``, built once."""
    if name not in self._variants:
      run = self.ablation_workdirs.get(name)
      g = registry.resolve(ABLATIONS.get(name).graph_agent, name)(
          self.stack, run, self.log)
      # the same starting memory as the full system (its own walker's when
      # the ablation trained one)
      self._variants[name] = g if run else self.stack.prepare_graph(g)
    return self._variants[name]


def _seed_passes(passes_: _Passes, calibrated, max_turns: int, seeds: int,
                 ablations, ablation_seeds) -> tuple[dict, dict, list]:
  """Per seed: the one-round pass without the critic, the full system and
  each ablation. Returns ``(pass name -> [records per seed], skipped
  ablation -> why, the critic's thresholds per seed)``."""
  graph = passes_.stack.graph
  per_seed = {"full": [], "no_critic": []}
  skipped, thresholds = {}, []
  for s in range(seeds):
    one_round = passes_.run(graph, LocalCritic(0.0, 0.0), 1, "no_critic", s)
    if calibrated is None:  # legacy: fitted on this split, two-fold
      critic, fitted = calibration.legacy_twofold(one_round)
    else:
      critic, fitted = critic_of(calibrated), calibrated["thresholds"]
    thresholds.append(fitted)
    per_seed["no_critic"].append(one_round)
    per_seed["full"].append(passes_.run(graph, critic, max_turns, "full", s))
    for a in ablations:
      if a == "no_critic" or (ablation_seeds is not None and
                              s >= ablation_seeds):
        continue
      if ABLATIONS.get(a).needs and a not in passes_.ablation_workdirs:
        skipped[a] = "needs " + _needs(a)
        continue
      if a == "hygrl" and not isinstance(graph, GraphAgent):
        skipped[a] = "the full system already uses a non-walker GraphAgent"
        continue
      per_seed.setdefault(a, []).append(
          passes_.run(passes_.variant(a), critic, max_turns, a, s))
  return per_seed, skipped, thresholds


def _setup_figures(stack, config, agents, figures: dict) -> dict:
  """What was evaluated: the LLM, the answer run, the retrieval and the
  knowledge shown."""
  return {
      **llm_figures.llm_figures(
          stack.llm_identity, stack.usage.to_dict(),
          figures.get("llm_answered_fraction"), agents,
          seats={seat: figures.get(f"llm_answered_fraction_{seat}")
                 for seat in metrics_lib.LLM_SEATS}),
      "answer_step": stack.local.step,
      "graph_agent": agents.graph,
      "retrieval_workdir": str(stack.refiner_dir),
      "paths_shown_to_answerer": stack.paths_shown,
      "paths_per_choice": stack.keep,
      "refiner_top_k_chosen": stack.keep_chosen,
      "use_openbook": bool(config.use_openbook),
      "choice_triples": int(config.answer.choice_triples),
      "similar_questions": int(config.answer.similar_questions),
  }


def protocol_figures(per_seed, calibrated, graph, learn_labels) -> dict:
  """How this evaluation kept (or, on purpose, broke) the protocol."""
  records = [r for runs in per_seed.values() for rs in runs for r in rs]
  updates = sum(int(r.get("memory_label_updates", 0)) for r in records)
  unsure = sum(int(r.get("unsure_rounds", 0)) for r in records)
  unpenalized = sum(int(r.get("unsure_without_memory", 0)) for r in records)
  warnings = []
  if learn_labels:
    warnings.append(
        "online-learning study: the shared memory learned from the gold "
        "answers of the evaluated questions (agents.learn_from_eval_labels"
        f"=True, {updates} edge counts), so earlier labels shaped later "
        "answers of this split")
  if calibrated is None:
    warnings.append(
        "the critic's thresholds were fitted two-fold on the evaluated "
        "split's own labels (--legacy_critic_calibration)")
  out = {"critic_calibration": (calibration.TWOFOLD if calibrated is None
                                else calibrated["critic_calibration"]),
         "memory_source": getattr(graph, "memory_source", "none"),
         "memory_eval_label_updates": updates,
         # RACER's UNSURE penalizes the rejected paths in the shared memory;
         # a walker run without one (memory.enabled=False) cannot
         "unsure_rounds": unsure,
         "unsure_rounds_without_memory": unpenalized,
         "learn_from_eval_labels": learn_labels,
         "protocol_warnings": warnings}
  if calibrated is not None:
    out["critic_calibration_questions"] = calibrated["figures"]["questions"]
    out["critic_calibration_figures"] = calibrated["figures"]
  return out


def _check_not_scored(stack, data, key) -> None:
  """Refuses to score questions of the critic's validation slice."""
  held = stack.validation_ids()
  scored = {data.examples[i].id for i in data.dataset.ids}
  both = held & scored
  if both:
    raise ValueError(f"{len(both)} questions of {key!r} (e.g. "
                     f"{sorted(both)[0]}) are in the validation slice the "
                     "critic was calibrated on: evaluate another split")


def verified_fraction(records: list[dict]) -> float:
  shown = [p["verified"] for r in records for rd in r["rounds"]
           for ps in rd["paths"] for p in ps for _ in p["triples"]]
  return float(np.mean(shown)) if shown else 1.0


def summarize(per_seed: dict[str, list[list[dict]]], seeds: int,
              trained_pruning: bool = False) -> dict:
  """Headline figures (mean ± std over seeds) of the full system, and one
  object per ablation with its ``delta_accuracy`` to the full system.
  A pure function of the per-question records."""
  full = [metrics_lib.question_metrics(r) for r in per_seed["full"]]
  figures = {"seeds": seeds, "questions": full[0]["questions"],
             "labeled": full[0]["labeled"],
             **metrics_lib.mean_std(full, headline_keys()),
             "per_seed": [{k: m[k] for k in ("accuracy", "path_hit_rate")}
                          for m in full]}
  table = {}
  for name, runs in per_seed.items():
    if name == "full":
      continue
    ms = [metrics_lib.question_metrics(r) for r in runs]
    row = metrics_lib.mean_std(ms, headline_keys())
    row["seeds"] = len(runs)
    same = metrics_lib.mean_std(full[:len(runs)], ("accuracy",
                                                   "path_hit_rate"))
    if row.get("accuracy") is not None and "accuracy" in same:
      row["delta_accuracy"] = row["accuracy"] - same["accuracy"]
      row["delta_path_hit_rate"] = (row.get("path_hit_rate", 0.0) -
                                    same.get("path_hit_rate", 0.0))
    row["description"] = ABLATIONS.get(name).description
    if name == "no_pruning" and not trained_pruning:
      row["description"] = "semantic pruning off at inference (all D " \
                           "actions; no run trained without it given)"
    table[name] = row
  figures["ablations"] = table
  if "no_critic" in table and "accuracy" in table["no_critic"]:
    figures["accuracy_no_critic"] = table["no_critic"]["accuracy"]
  for name in ("no_refiner", "no_memory"):
    if name in table and "accuracy" in table[name]:
      figures[f"accuracy_{name}"] = table[name]["accuracy"]
  return figures
