r"""Evaluates a trained run (walker, HyGRL or refiner) from its checkpoint.

  python launch/evaluate.py --workdir=runs/demo
  python launch/evaluate.py --workdir=runs/csqa --data_dir=../shared/data \
      --split=dev --step=3000

Uses the config saved in the workdir unless ``--config`` is given. Prints
the figures; the last line is one JSON object: for the walker
``path_hit_rate``, ``oracle_hit_rate``, ``mean_path_length``, ...; for a
HyGRL run (``method=hygrl``) ``recall_policy``, ``recall_heuristic``,
``mean_subgraph_nodes_policy``, ``mean_subgraph_nodes_heuristic``, ... and,
with ``--walker_workdir``, the RACER walker's retrieval figures; for a
refiner run (``train.stage=refiner``) ``gold_in_topk_refiner``,
``gold_in_topk_random``, ``gold_in_topk_logprob``, ``hit_rate_memory_on``,
``hit_rate_memory_off``, ... and, with ``--top_ks``, a sweep over k'; for
an answer run (``stage=answer``) the four-agent pipeline: ``accuracy``,
``accuracy_answer_head_only``, ``llm_calls_per_question``,
``tokens_per_question``, ``triples_verified_fraction``, the ablations,
``critic_calibration`` (where the critic's thresholds were fitted:
``validation``, the answer run's held-out training questions, or with
``--legacy_critic_calibration`` ``twofold_eval_split``), ``memory_source``
and ``memory_eval_label_updates`` (0 unless ``--learn_from_eval_labels``),
...;
with ``--ensemble=DIR,...`` the AnswerAgent averages several answer runs
shown the same triples and paths (each with its own extra text); with
``--answer_only`` the answer model alone from its newest checkpoint (with
``--ensemble``, several answer runs' probabilities averaged, each shown its
own knowledge): ``accuracy``,
``accuracy_members``, ``accuracy_members_mean``, ...
"""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402
import ml_collections  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from configs import default as default_config  # noqa: E402
from racer_jax.eval import agents_eval, answer_eval  # noqa: E402
from racer_jax.eval import refiner_eval  # noqa: E402
from racer_jax.eval import retrieval_eval  # noqa: E402
from racer_jax.eval import walker_eval  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Configuration file (default: <workdir>/config.json).")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory.",
                               required=True)
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step (default: "
                             "the newest).")
_SPLIT = flags.DEFINE_string("split", None, "Split (default: eval.split).")
_PROGRESS = flags.DEFINE_bool("progress", True, "Show progress bars.")
_MEMORY_BETA = flags.DEFINE_float(
    "memory_beta", None, "Walker runs with a shared memory: override its "
    "reranking weight (0 = memory off).")
_TAUS = flags.DEFINE_list(
    "taus", [], "HyGRL runs: also evaluate policy and heuristic at these "
    "thresholds (a recall-vs-subgraph-size sweep).")
_TOP_KS = flags.DEFINE_list(
    "top_ks", [], "Refiner runs: also report every selector at these k' "
    "(a sweep for choosing refiner.top_k on validation).")
_BASELINE = flags.DEFINE_list(
    "baseline_workdir", [], "Answer runs: an answer run trained without "
    "knowledge, for accuracy_answer_head_only (several: their ensemble, "
    "the fair baseline of an --ensemble).")
_BACKEND = flags.DEFINE_enum(
    "backend", None, ["local", "gemini"], "Answer runs: the agents' LLM "
    "backend (default: agents.backend of the config).")
_RETRIEVAL = flags.DEFINE_string(
    "retrieval_workdir", None, "Answer runs trained without paths: the "
    "GraphAgent's refiner run; its paths are the critic's support and the "
    "evidence, the answerer keeps its own input (agents.retrieval_workdir).")
_API_KEY = flags.DEFINE_string(
    "api_key", None, "Gemini API key (default: $GEMINI_API_KEY or "
    "$GOOGLE_API_KEY). Never printed or written.")
_ABLATIONS = flags.DEFINE_bool(
    "ablations", False, "Answer runs: also run the ablation table (every "
    "ablation of --ablation_names).")
_ABLATION_NAMES = flags.DEFINE_list(
    "ablation_names", list(agents_eval.ABLATIONS), "Answer runs: the "
    "ablations run with --ablations.")
_ABLATION_WORKDIRS = flags.DEFINE_list(
    "ablation_workdirs", [], "Answer runs: NAME=DIR pairs for ablations "
    "that need their own run: no_teacher=<refiner run over a walker "
    "trained with p_teacher=0>, hygrl=<HyGRL run>.")
_SEEDS = flags.DEFINE_integer(
    "seeds", None, "Answer runs: evaluation seeds (default eval.seeds); "
    "headline numbers are mean ± std over them.")
_ABLATION_SEEDS = flags.DEFINE_integer(
    "ablation_seeds", None, "Answer runs: run the ablations for the first N "
    "seeds only (default: every seed); deltas use the same seeds.")
_RESUME = flags.DEFINE_bool(
    "resume", False, "Answer runs: continue a stopped evaluation in the "
    "same run folder without redoing finished questions.")
_LEGACY_CRITIC = flags.DEFINE_bool(
    "legacy_critic_calibration", False, "Answer runs trained before "
    "validation slices: fit the critic two-fold on the evaluated split's "
    "own labels (the old protocol; the report's first line says so).")
_LEARN_FROM_EVAL_LABELS = flags.DEFINE_bool(
    "learn_from_eval_labels", False, "Answer runs: an online-learning study "
    "— the gold answers of evaluated questions add success/failure counts "
    "to the shared memory that rerank later questions of the split "
    "(agents.learn_from_eval_labels; not a held-out figure, and the report "
    "says so in its first line).")
_EVAL_FILE = flags.DEFINE_string(
    "eval_file", None, "Answer runs: evaluate on this jsonl (the "
    "CommonsenseQA/OpenBookQA format) instead of a split.")
_ANSWER_ONLY = flags.DEFINE_bool(
    "answer_only", False, "Answer runs: evaluate the answer model alone "
    "from its checkpoint, shown the knowledge it was trained with (no "
    "agents; racer_jax/eval/answer_eval.py).")
_DRY_RUN = flags.DEFINE_bool(
    "dry_run", False, "Answer runs with --backend=gemini: build every prompt "
    "the evaluation would send (round 1 exactly, later rounds bounded), "
    "write them to <workdir>/eval/<split>/prompts.jsonl, count calls and "
    "tokens; no generate call is made and no key is needed.")
_MAX_QUESTIONS = flags.DEFINE_integer(
    "max_questions", 0, "Answer runs (the agents' evaluation): only the "
    "first N questions of the split (0: all).")
_ENSEMBLE = flags.DEFINE_list(
    "ensemble", [], "Answer runs: more answer runs whose choice "
    "probabilities are averaged with --workdir's. With --answer_only each "
    "is shown its own knowledge; in the agents' loop all must have been "
    "trained on --workdir's triples and paths (similar questions and open "
    "book may differ: each member is shown its own).")
_COMPARE = flags.DEFINE_list(
    "compare", [], "LABEL=DIR walker runs trained with train.eval_every "
    "(repeat a label for seeds): compare learning speed (updates to reach "
    "--target of eval/--compare_key, final value) instead of evaluating; "
    "the table and curves go to --workdir.")
_COMPARE_KEY = flags.DEFINE_string("compare_key", "path_hit_rate",
                                   "The curve --compare reads.")
_TARGET = flags.DEFINE_float("target", None, "--compare: the value to "
                             "reach (default 95% of the lowest final).")
_WALKER = flags.DEFINE_string(
    "walker_workdir", None, "HyGRL runs: a walker run whose evaluation on "
    "the same split joins the retrieval table.")


def compare_main():
  from racer_jax.eval import learning_curves
  runs = [tuple(p.split("=", 1)) for p in _COMPARE.value]
  if any(len(r) != 2 for r in runs):
    raise app.UsageError("--compare takes LABEL=DIR pairs")
  result = learning_curves.write_comparison(
      runs, _WORKDIR.value, key=_COMPARE_KEY.value, target=_TARGET.value)
  print((Path(_WORKDIR.value) / "comparison.md").read_text())
  print(json.dumps(result, sort_keys=True))


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  if _COMPARE.value:
    return compare_main()
  config = _CONFIG.value
  if config is None:
    path = os.path.join(_WORKDIR.value, "config.json")
    if not os.path.exists(path):
      raise app.UsageError(f"{path} not found: pass --config or train first")
    with open(path, encoding="utf-8") as f:
      config = ml_collections.ConfigDict(json.load(f))
  stage = config.train.get("stage", "walker")
  if _ENSEMBLE.value and stage != "answer":
    raise app.UsageError("--ensemble needs an answer run")
  for flag in (_LEGACY_CRITIC, _LEARN_FROM_EVAL_LABELS):
    if flag.value and (stage != "answer" or _ANSWER_ONLY.value):
      raise app.UsageError(f"--{flag.name} applies to the agents' evaluation "
                           "of an answer run (not --answer_only)")
  for flag in (_DRY_RUN, _MAX_QUESTIONS):
    if flag.value and (stage != "answer" or _ANSWER_ONLY.value):
      raise app.UsageError(f"--{flag.name} applies to the agents' evaluation "
                           "of an answer run (not --answer_only)")
  if stage == "answer" and _ANSWER_ONLY.value:
    figures = answer_eval.evaluate(
        config, _DATA_DIR.value, _WORKDIR.value, ensemble=_ENSEMBLE.value,
        split=_SPLIT.value, progress=_PROGRESS.value)
  elif stage == "answer":
    # Runs saved before the agents section existed get its defaults.
    agents = ml_collections.ConfigDict(default_config.get_config().agents)
    agents.update(config.get("agents", {}))
    if _BACKEND.value:
      agents.backend = _BACKEND.value
    if _RETRIEVAL.value:
      agents.retrieval_workdir = _RETRIEVAL.value
    if _LEARN_FROM_EVAL_LABELS.value:
      agents.learn_from_eval_labels = True
    pairs = [p.split("=", 1) for p in _ABLATION_WORKDIRS.value]
    if any(len(p) != 2 for p in pairs):
      raise app.UsageError("--ablation_workdirs takes NAME=DIR pairs")
    seeds = _SEEDS.value or config.eval.get("seeds", 1)
    figures = agents_eval.evaluate(
        config, _DATA_DIR.value, _WORKDIR.value, split=_SPLIT.value,
        eval_file=_EVAL_FILE.value, seeds=seeds, resume=_RESUME.value,
        baseline_workdir=_BASELINE.value or None, agents=agents,
        api_key=_API_KEY.value,
        ablations=_ABLATION_NAMES.value if _ABLATIONS.value else (),
        ablation_workdirs=dict(pairs), ablation_seeds=_ABLATION_SEEDS.value,
        ensemble=_ENSEMBLE.value,
        legacy_critic_calibration=_LEGACY_CRITIC.value,
        max_questions=_MAX_QUESTIONS.value, dry_run=_DRY_RUN.value,
        progress=_PROGRESS.value)
  elif stage == "refiner":
    figures = refiner_eval.evaluate(
        config, _DATA_DIR.value, _WORKDIR.value, step=_STEP.value,
        split=_SPLIT.value, top_ks=[int(k) for k in _TOP_KS.value],
        progress=_PROGRESS.value)
  elif config.get("method", "racer") == "hygrl":
    figures = retrieval_eval.evaluate(
        config, _DATA_DIR.value, _WORKDIR.value, step=_STEP.value,
        split=_SPLIT.value, walker_workdir=_WALKER.value,
        taus=[float(t) for t in _TAUS.value], progress=_PROGRESS.value)
  else:
    figures = walker_eval.evaluate(config, _DATA_DIR.value, _WORKDIR.value,
                                   step=_STEP.value, split=_SPLIT.value,
                                   memory_beta=_MEMORY_BETA.value,
                                   progress=_PROGRESS.value)
  for warning in figures.get("protocol_warnings", []):
    print(f"NOT A HELD-OUT EVALUATION: {warning}")
  width = max(map(len, figures))
  for k, v in figures.items():
    if k in ("sweep", "ablations", "llm", "per_seed", "critic_thresholds",
             "per_agent",
             "ablations_skipped", "protocol_warnings",
             "critic_calibration_figures"):
      continue
    print(f"{k:<{width}}  {v:.4f}" if isinstance(v, float) else
          f"{k:<{width}}  {v}")
  if figures.get("sweep") and "top_k" in figures["sweep"][0]:
    print("k'   gold in top-k': refiner / random / logprob / per hop")
    for row in figures["sweep"]:
      print(f"{row['top_k']:<4} " + " / ".join(
          f"{row['gold_in_topk_' + s]:.3f}" for s in refiner_eval.SELECTORS))
  elif figures.get("sweep"):
    print("tau    recall policy / heuristic    nodes policy / heuristic")
    for row in figures["sweep"]:
      print(f"{row['tau']:<6} {row['recall_policy']:>13.3f} / "
            f"{row['recall_heuristic']:<9.3f} "
            f"{row['mean_subgraph_nodes_policy']:>12.2f} / "
            f"{row['mean_subgraph_nodes_heuristic']:.2f}")
  if figures.get("llm") and figures["llm"].get("llm_calls"):
    llm = figures["llm"]
    print(f"LLM: {llm['llm_calls']} calls ({llm['llm_cache_hits']} cached), "
          f"{llm['input_tokens']} tokens in / {llm['output_tokens']} out; "
          f"{llm['fallbacks']} answers or verdicts FELL BACK to the local "
          f"models" + (f" (errors: {llm['llm_errors']})"
                       if llm["llm_errors"] else ""))
  for name, row in figures.get("ablations", {}).items():
    print(f"ablation {name:<12} accuracy {row.get('accuracy', float('nan')):.4f}"
          f"  delta {row.get('delta_accuracy', float('nan')):+.4f}")
  print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
  app.run(main)
