"""Evaluating any trained run from its checkpoint: ``launch/evaluate.py``.

The run's saved config says what it is (:func:`run_kind`): a walker, a
HyGRL policy, a refiner, or an answer run (the four agents' evaluation, or
with ``answer_only`` the answer model alone); ``compare`` is the
learning-speed comparison of several walker runs. :data:`OPTIONS` is the
one table of the evaluation's options: type, default, help and the kinds of
run each applies to; the launcher turns it into flags, and an option given
for a run it does not apply to is refused (:func:`refuse_inapplicable`)
rather than ignored.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from racer_jax.data import validation
from racer_jax.errors import ConfigError, a_or_an
from racer_jax.answer import evaluation as answer_eval
from racer_jax.eval import (
  agents_eval,
  explorer_eval,
  learning_curves,
  llm_figures,
  lm_knowledge,
  report,
)
from racer_jax.graphdancer import evaluation as explorer_training_eval
from racer_jax.refiner import evaluation as refiner_eval
from racer_jax.walker import evaluation as walker_eval
from racer_jax.hygrl import multihop_eval, retrieval_eval
from racer_jax.llm import llm_backends
from racer_jax.lm import scorers
from racer_jax.runs import registry, run_config
from racer_jax.runs.config_checks import check_config

KINDS = ("walker", "hygrl", "multihop", "refiner", "agents", "answer_only",
         "explorer", "compare")
_CHECKPOINTED = ("walker", "hygrl", "multihop", "refiner")
_TRAINED = ("walker", "hygrl", "multihop", "refiner", "agents",
            "answer_only", "explorer")


@dataclasses.dataclass(frozen=True)
class Option:
  name: str
  type: str          # "string" | "integer" | "float" | "bool" | "list"
  default: object
  help: str
  kinds: tuple[str, ...]


OPTIONS = (
    Option("step", "integer", None, "Checkpoint step (default: the newest).",
           _CHECKPOINTED),
    Option("split", "string", None, "Split (default: eval.split); "
           "walker and refiner runs also take 'validation', "
           "the training questions the run left out.", _TRAINED),
    Option("memory_beta", "float", None, "Walker runs with a shared memory: "
           "override its reranking weight (0 = memory off).", ("walker",)),
    Option("taus", "list", [], "HyGRL runs: also evaluate policy and "
           "heuristic at these thresholds (recall vs subgraph size).",
           ("hygrl",)),
    Option("walker_workdir", "string", None, "HyGRL runs: a walker run "
           "whose evaluation on the same split joins the table.", ("hygrl",)),
    Option("top_ks", "list", [], "Refiner runs: also report every selector "
           "at these k' (for choosing refiner.top_k).", ("refiner",)),
    Option("explorer_only", "bool", False, "Answer runs: GraphDancer's "
           "explorer alone answers (needs an LLM backend and "
           "--llm_setting=graph=explorer); its VF, VC, EH, calls and "
           "accuracy.", ("agents",)),
    Option("answer_only", "bool", False, "Answer runs: the answer model "
           "alone from its checkpoint, shown the knowledge it was trained "
           "with (no agents).", ("answer_only",)),
    Option("ensemble", "list", [], "Answer runs: more answer runs whose "
           "choice probabilities are averaged with --workdir's.",
           ("agents", "answer_only")),
    Option("baseline_workdir", "list", [], "Answer runs: answer run(s) "
           "trained without knowledge, for accuracy_answer_head_only.",
           ("agents",)),
    Option("backend", "string", None, "The agents' LLM, one of "
           f"{', '.join(registry.LLM_BACKENDS.names())} (local: the trained "
           "models; openai: OpenAI or any OpenAI-compatible server; jax: an "
           "LM in this process; default: the run's agents.backend).",
           ("agents", "multihop")),
    Option("model", "string", None, "The LLM's model name (default: the "
           "run's agents.model; gemini: gemini-3.5-flash; jax: a GGUF file "
           "or Hugging Face folder, default SmolLM2-135M-Instruct).",
           ("agents", "multihop")),
    Option("base_url", "string", None, "The LLM's endpoint, e.g. "
           "http://127.0.0.1:8000/v1 for a vLLM or llama.cpp server.",
           ("agents", "multihop")),
    Option("llm_setting", "list", [], "More agents.FIELD=VALUE for the "
           "LLM: temperature, max_output_tokens, thinking_budget, "
           "thinking_level, reasoning_effort, structured_output, timeout_s, "
           "attempts, max_concurrency, min_llm_answered, show_paths; "
           "graph=explorer puts GraphDancer's explorer in the GraphAgent's "
           "seat (max_interactions: its steps per question).",
           ("agents", "multihop")),
    Option("require_llm", "bool", False, "Exit with an error (after saving "
           "the records) when the LLM gave fewer than "
           "agents.min_llm_answered of the answers.", ("agents",)),
    Option("api_key", "string", None, "API key (default: $GEMINI_API_KEY / "
           "$GOOGLE_API_KEY for gemini, $OPENAI_API_KEY for openai). Never "
           "printed or written.", ("agents", "multihop")),
    Option("retrieval_workdir", "string", None, "Answer runs trained "
           "without paths: the GraphAgent's refiner run.", ("agents",)),
    Option("eval_file", "string", None, "Evaluate on this file instead of "
           "a split: agents, a jsonl in CommonsenseQA/OpenBookQA format; "
           "multi-hop HyGRL runs and passage-graph explorers, questions of "
           "the run's corpus in its question file's format.",
           ("agents", "multihop", "explorer")),
    Option("seeds", "integer", None, "Evaluation seeds (default "
           "eval.seeds); headline numbers are mean ± std over them.",
           ("agents",)),
    Option("resume", "bool", False, "Continue a stopped evaluation without "
           "redoing finished questions.", ("agents",)),
    Option("ablations", "bool", False, "Also run the ablation table.",
           ("agents",)),
    Option("ablation_names", "list", list(agents_eval.ABLATIONS.names()), "The "
           "ablations run with --ablations.", ("agents",)),
    Option("ablation_workdirs", "list", [], "NAME=DIR runs of ablations "
           "that need their own training (no_teacher=, no_pruning=, "
           "hygrl=).", ("agents",)),
    Option("ablation_seeds", "integer", None, "Run the ablations for the "
           "first N seeds only.", ("agents",)),
    Option("legacy_critic_calibration", "bool", False, "Answer runs "
           "trained before validation slices: fit the critic two-fold on "
           "the evaluated split's labels (the report says so).", ("agents",)),
    Option("learn_from_eval_labels", "bool", False, "An online-learning "
           "study: evaluated questions' gold answers update the shared "
           "memory (not a held-out figure; the report says so).",
           ("agents",)),
    Option("dry_run", "bool", False, "With an LLM backend: build and count "
           "every prompt, send none (no key needed).", ("agents",)),
    Option("max_questions", "integer", 0, "Only the first N questions of "
           "the split (0: all); multi-hop runs: of the LLM's reader and "
           "explorer.", ("agents", "multihop")),
    Option("reader_rankings", "list", list(multihop_eval.READER_RANKINGS),
           "Multi-hop runs with an LLM: the rankings whose top 5 passages "
           "the reader answers from, each its own figures (policy, "
           "heuristic, bm25, dense; reranker with multihop.relevance="
           "cross_encoder).", ("multihop",)),
    Option("lm_knowledge", "bool", False, "Answer runs: score every "
           "knowledge arm (none, paths, other questions' paths, random "
           "triples, the choices' triples, OBQA's open book) with a "
           "language model's log-likelihoods (--backend=jax [--model=...] "
           "or an OpenAI-compatible server that returns prompt "
           "log-probs).", ("agents",)),
    Option("lm_metric", "string", "acc_norm", "--lm_knowledge: the metric "
           "the comparisons and the format choice use (acc, acc_norm, "
           "acc_pmi).", ("agents",)),
    Option("lm_scoring", "string", "auto", "--lm_knowledge: jax, echo "
           "(/v1/completions with prompt log-probs) or letters (a chat "
           "API's top log-probs over lettered options).", ("agents",)),
    Option("lm_validation_questions", "integer", 200, "--lm_knowledge: "
           "validation questions the knowledge format is chosen on.",
           ("agents",)),
    Option("lm_format", "string", "auto", "--lm_knowledge: how the "
           "knowledge is written: auto (chosen on validation) or "
           "FORMAT:LINES (triples, sentences or per_choice, e.g. "
           "triples:5).", ("agents",)),
    Option("compare", "list", [], "LABEL=DIR walker runs trained with "
           "train.eval_every: compare their learning speed instead of "
           "evaluating (table and curves go to --workdir).", ("compare",)),
    Option("compare_key", "string", "path_hit_rate", "The curve --compare "
           "reads.", ("compare",)),
    Option("target", "float", None, "--compare: the value to reach "
           "(default 95% of the lowest final).", ("compare",)),
)
_BY_NAME = {o.name: o for o in OPTIONS}


def load_run_config(workdir, config=None):
  """``config``, else the one saved in ``workdir/config.json``."""
  if config is not None:
    return config
  path = Path(workdir) / "config.json"
  if not path.exists():
    raise ConfigError(f"{path} not found: pass --config or train the run "
                      "first")
  return run_config.load(workdir, "run given by --workdir")


def run_kind(config, options: dict) -> str:
  """Which evaluation ``config``'s run gets (one of :data:`KINDS`)."""
  if options.get("compare"):
    return "compare"
  stage = config.train.stage
  if stage == "answer":
    return "answer_only" if options.get("answer_only") else "agents"
  if stage == "refiner":
    return "refiner"
  method = config.method
  if method == "hygrl_multihop":
    return "multihop"
  if method == "graphdancer":
    return "explorer"
  return "hygrl" if method == "hygrl" else "walker"


def refuse_inapplicable(kind: str, given) -> None:
  """Raises ConfigError for an option in ``given`` (the names the user
  set) that does not apply to a ``kind`` run."""
  for name in sorted(given):
    option = _BY_NAME.get(name)
    if option is not None and kind not in option.kinds:
      raise ConfigError(
          f"--{name} does not apply to {a_or_an(kind)} evaluation (it applies to "
          f"{', '.join(option.kinds)} runs)")


def _pairs(values, flag: str) -> list[tuple[str, str]]:
  pairs = [tuple(v.split("=", 1)) for v in values]
  if any(len(p) != 2 or not all(p) for p in pairs):
    raise ConfigError(f"--{flag} takes NAME=DIR pairs, got {values}")
  return pairs


def evaluate_run(config, data_dir, workdir, options: dict, *,
                 progress: bool = True) -> dict:
  """Evaluates the run; ``options``: :data:`OPTIONS` by name (missing ones
  take their defaults). Returns the figures (the launcher's JSON)."""
  o = {**{x.name: x.default for x in OPTIONS}, **options}
  kind = run_kind(config, o)
  if kind == "compare":
    return learning_curves.write_comparison(
        _pairs(o["compare"], "compare"), workdir, key=o["compare_key"],
        target=o["target"])
  check_config(config)
  if o["split"] == validation.SPLIT and kind not in ("refiner", "walker"):
    raise ConfigError(f"--split={validation.SPLIT}: only walker and refiner "
                      f"runs evaluate on their validation slice; "
                      f"{a_or_an(kind)} run takes a dataset split")
  if kind == "explorer":
    return explorer_training_eval.evaluate(config, data_dir, workdir,
                                           split=o["split"],
                                           eval_file=o["eval_file"],
                                           progress=progress)
  if kind == "answer_only":
    return answer_eval.evaluate(config, data_dir, workdir,
                                ensemble=o["ensemble"], split=o["split"],
                                progress=progress)
  if kind == "agents" and o["lm_knowledge"]:
    return _lm_knowledge(config, data_dir, workdir, o, progress)
  if kind == "agents":
    if o["seeds"] is not None and o["seeds"] < 1:
      raise ConfigError(f"--seeds={o['seeds']}: must be at least 1 (leave "
                        "it out for eval.seeds)")
    agents = llm_backends.evaluation_agents(
        config, backend=o["backend"], model=o["model"],
        base_url=o["base_url"], settings=o["llm_setting"])
    if o["retrieval_workdir"]:
      agents.retrieval_workdir = o["retrieval_workdir"]
    if o["learn_from_eval_labels"]:
      agents.learn_from_eval_labels = True
    if o["dry_run"] and agents.answer_mode == "score":
      raise ConfigError("--dry_run counts the prompts an LLM would be sent "
                        "to generate; agents.answer_mode=score sends none")
    if o["dry_run"] and agents.backend == "local":
      raise ConfigError("--dry_run counts an LLM's prompts: add "
                        + registry.llm_backend_flags())
    if o["explorer_only"]:
      return explorer_eval.evaluate(
          config, data_dir, workdir, agents=agents, split=o["split"],
          eval_file=o["eval_file"], api_key=o["api_key"],
          max_questions=o["max_questions"], progress=progress)
    if o["require_llm"] and agents.backend == "local":
      raise ConfigError("--require_llm needs an LLM backend: add "
                        + registry.llm_backend_flags())
    return agents_eval.evaluate(
        config, data_dir, workdir, split=o["split"],
        eval_file=o["eval_file"],
        seeds=o["seeds"] or config.eval.seeds, resume=o["resume"],
        baseline_workdir=o["baseline_workdir"] or None, agents=agents,
        api_key=o["api_key"],
        ablations=o["ablation_names"] if o["ablations"] else (),
        ablation_workdirs=dict(_pairs(o["ablation_workdirs"],
                                      "ablation_workdirs")),
        ablation_seeds=o["ablation_seeds"], ensemble=o["ensemble"],
        legacy_critic_calibration=o["legacy_critic_calibration"],
        max_questions=o["max_questions"], dry_run=o["dry_run"],
        progress=progress)
  if kind == "refiner":
    return refiner_eval.evaluate(config, data_dir, workdir, step=o["step"],
                                 split=o["split"],
                                 top_ks=[int(k) for k in o["top_ks"]],
                                 progress=progress)
  if kind == "multihop":
    agents = None
    if o["backend"] or o["llm_setting"]:
      agents = llm_backends.evaluation_agents(
          config, backend=o["backend"], model=o["model"],
          base_url=o["base_url"], settings=o["llm_setting"])
      if agents.backend == "local":
        raise ConfigError("the reader and explorer need an LLM: add "
                          + registry.llm_backend_flags())
    elif list(o["reader_rankings"]) != list(multihop_eval.READER_RANKINGS):
      raise ConfigError("--reader_rankings chooses what the LLM reader "
                        "reads: add " + registry.llm_backend_flags())
    return multihop_eval.evaluate(config, data_dir, workdir, step=o["step"],
                                  split=o["split"], eval_file=o["eval_file"],
                                  agents=agents, api_key=o["api_key"],
                                  max_questions=o["max_questions"],
                                  reader_rankings=o["reader_rankings"],
                                  progress=progress)
  if kind == "hygrl":
    return retrieval_eval.evaluate(config, data_dir, workdir,
                                   step=o["step"], split=o["split"],
                                   walker_workdir=o["walker_workdir"],
                                   taus=[float(t) for t in o["taus"]],
                                   progress=progress)
  return walker_eval.evaluate(config, data_dir, workdir, step=o["step"],
                              split=o["split"],
                              memory_beta=o["memory_beta"],
                              progress=progress)


_LM_OPTIONS = {"lm_knowledge", "lm_metric", "lm_scoring", "lm_format",
               "lm_validation_questions", "ablation_workdirs", "split",
               "eval_file",
               "max_questions", "backend", "model", "base_url", "api_key"}


def _lm_knowledge(config, data_dir, workdir, o: dict, progress: bool):
  """``--lm_knowledge``: the knowledge arms through a scorer; the agents'
  options that do not apply are refused."""
  defaults = {x.name: x.default for x in OPTIONS}
  stray = sorted(k for k, v in o.items()
                 if k not in _LM_OPTIONS and v != defaults.get(k))
  if stray:
    raise ConfigError(f"--{stray[0]} does not apply with --lm_knowledge")
  if o["lm_format"] != "auto":
    lm_knowledge.parse_format(o["lm_format"])
  scorer = scorers.make_scorer(o["backend"] or "jax", o["lm_scoring"],
                               model=o["model"], base_url=o["base_url"],
                               api_key=o["api_key"])
  return lm_knowledge.evaluate(
      config, data_dir, workdir, scorer, split=o["split"],
      eval_file=o["eval_file"], max_questions=o["max_questions"],
      ablation_workdirs=dict(_pairs(o["ablation_workdirs"],
                                    "ablation_workdirs")),
      validation_questions=o["lm_validation_questions"],
      metric=o["lm_metric"], knowledge_format=o["lm_format"],
      progress=progress)


def check_required(figures: dict, options: dict) -> None:
  """``--require_llm``: an error (after the figures are printed and the
  records saved) when the LLM gave too few of the answers."""
  if options.get("require_llm"):
    llm_figures.require_llm(figures)


_NOT_SCALARS = ("lm_validation_grid", "sweep", "ablations", "llm", "per_seed", "critic_thresholds",
                "per_agent", "ablations_skipped", "protocol_warnings",
                "critic_calibration_figures", "llm_settings", "llm_errors",
                "llm_headline")


def figures_text(figures: dict, kind: str, workdir) -> str:
  """The figures as the launcher prints them before the JSON line."""
  if kind == "compare":
    return (Path(workdir) / "comparison.md").read_text()
  lines = [figures["llm_headline"]] if figures.get("llm_headline") else []
  lines += [f"NOT A HELD-OUT EVALUATION: {w}"
            for w in figures.get("protocol_warnings", [])]
  if figures.get("unsure_rounds_without_memory"):
    lines.append("NOTE:" + report.unsure_phrase(figures))
  width = max(map(len, figures), default=0)
  for k, v in figures.items():
    if k not in _NOT_SCALARS and not isinstance(v, (dict, list)):
      lines.append(f"{k:<{width}}  {v:.4f}" if isinstance(v, float) else
                   f"{k:<{width}}  {v}")
  sweep = figures.get("sweep") or []
  if sweep and "top_k" in sweep[0]:
    lines.append("k'   gold in top-k': refiner / random / logprob / per hop")
    lines += [f"{row['top_k']:<4} " + " / ".join(
        f"{row['gold_in_topk_' + s]:.3f}" for s in refiner_eval.SELECTORS)
              for row in sweep]
  elif sweep:
    lines.append("tau    recall policy / heuristic    nodes policy / "
                 "heuristic")
    lines += [f"{row['tau']:<6} {row['recall_policy']:>13.3f} / "
              f"{row['recall_heuristic']:<9.3f} "
              f"{row['mean_subgraph_nodes_policy']:>12.2f} / "
              f"{row['mean_subgraph_nodes_heuristic']:.2f}" for row in sweep]
  llm = figures.get("llm") or {}
  if llm.get("llm_calls") or llm.get("fallbacks") or llm.get("llm_errors"):
    lines.append(
        f"LLM: {llm['llm_calls']} calls ({llm['llm_cache_hits']} cached), "
        f"{llm['input_tokens']} tokens in / {llm['output_tokens']} out / "
        f"{llm.get('thinking_tokens', 0)} thinking; "
        f"{llm['fallbacks']} answers or verdicts FELL BACK to the local "
        "models" + (f" (errors: {llm['llm_errors']})"
                    if llm["llm_errors"] else ""))
  if figures.get("labeled") == 0:
    lines.append("no question is labelled: accuracy and the other figures "
                 "that need a gold answer cannot be computed")
  for name, row in figures.get("ablations", {}).items():
    if "accuracy" in row:
      lines.append(f"ablation {name:<12} accuracy {row['accuracy']:.4f}  "
                   f"delta {row.get('delta_accuracy', 0.0):+.4f}")
  m = figures.get("machine")
  if m:
    lines.append(f"machine: {m['cpu_model']} ({m['cpu_vector_isa']}, "
                 f"{m['cpu_count']} CPUs), {m['device']}, jax "
                 f"{m['jax_version']}, XLA_FLAGS={m['xla_flags']!r}")
  return "\n".join(lines)
