"""The Markdown report of an evaluation run folder: headline table (mean ±
std over seeds), ablation table with deltas to the full system,
efficiency, and the pictures (training curves of the runs the answer run
was built from, the ablation bar chart, the reasoning paths of one
question)."""

from __future__ import annotations

import json
from pathlib import Path

from racer_jax.agents.critic import support_rule
from racer_jax.runs import run_config
from racer_jax.eval import plots, qa_metrics

# the run's own efficiency figures, after the per-question ones
RUN_EFFICIENCY = ("peak_rss_gb", "peak_device_memory_gb", "wall_s",
                  "resumed_batches", "torn_lines_redone")


def _fmt(value, std=None, digits: int = 3) -> str:
  if value is None:
    return "–"
  if isinstance(value, float):
    text = f"{value:.{digits}f}"
    return text + (f" ± {std:.{digits}f}" if std is not None else "")
  return str(value)


def stack_workdirs(config, workdir: Path) -> dict[str, Path]:
  """``{"walker": ..., "refiner": ..., "answer": ...}`` of an answer run."""
  runs = {}
  refiner = config.answer.knowledge_workdir
  if refiner and (Path(refiner) / "config.json").exists():
    rconfig = run_config.load(refiner, "refiner run")
    walker = rconfig.refiner.walker_workdir
    if walker:
      runs["walker"] = Path(walker)
    runs["refiner"] = Path(refiner)
  runs["answer"] = Path(workdir)
  return runs


def example_record(out_dir: Path) -> dict | None:
  """The first correctly answered question with evidence of seed 0's full
  pass (else the first question), for the path drawing."""
  path = out_dir / "full.seed0.jsonl"
  if not path.exists():
    return None
  first = None
  for line in path.read_text(encoding="utf-8").splitlines():
    try:
      r = json.loads(line)
    except json.JSONDecodeError:
      break
    first = first or r
    if r.get("correct") and r.get("evidence"):
      return r
  return first


def _protocol_line(figures: dict) -> str:
  """Where the critic's thresholds and the memory's counts came from."""
  source = figures.get("critic_calibration")
  t = figures.get("critic_thresholds") or {}
  if source == "validation":
    critic = (f"fitted on the answer run's validation slice of the training "
              f"split ({figures.get('critic_calibration_questions')} "
              f"questions): ACCEPT at p ≥ {t.get('min_confidence', 0):.3f} "
              f"and path support {support_rule(t.get('min_support', 0))}")
    if (figures.get("critic_calibration_figures") or {}).get(
        "retrieval_trained_on_validation"):
      critic += (" (the walker or refiner trained on those questions, so "
                 "they are easier than unseen ones)")
  else:
    critic = "fitted two-fold on the evaluated split (legacy protocol)"
  if figures.get("score_critic_min_accept") is not None:
    fit = figures.get("score_critic_calibration") or {}
    critic += (f"; the scoring critic ACCEPTs at P(ACCEPT) ≥ "
               f"{figures['score_critic_min_accept']:.3f}, fitted on "
               f"{fit.get('questions')} validation questions (AUC "
               f"{fit.get('p_accept_auc')})")
  line = (f"Protocol: critic thresholds {critic}; shared memory from "
          f"`{figures.get('memory_source')}`, "
          f"{figures.get('memory_eval_label_updates', 0)} edge counts added "
          "from evaluated labels (only the critic's label-free rejections "
          "change it otherwise).")
  return line + unsure_phrase(figures)


def unsure_phrase(figures: dict) -> str:
  """The UNSURE rounds whose paths no memory could penalize ('' if
  none)."""
  n = figures.get("unsure_rounds_without_memory", 0)
  if not n:
    return ""
  return (f" {n} of {figures.get('unsure_rounds', n)} UNSURE rounds could "
          "not penalize their paths: the walker run has no shared memory "
          "(train it with memory.enabled=True).")


def _llm_phrase(figures: dict) -> str:
  """Who sat in the Answer and Critic seats."""
  if figures.get("backend", "local") == "local":
    return "the local models in the agents' seats (no LLM)"
  return (f"LLM `{figures.get('model')}` ({figures.get('backend')} at "
          f"{figures.get('base_url')})")


def report_lines(out_dir: Path, figures: dict, *, config,
                 workdir: Path) -> list[str]:
  """The agents evaluation's ``report.md`` (its pictures drawn into
  ``out_dir``)."""
  out_dir = Path(out_dir)
  pictures = {}
  curves = plots.training_curves(stack_workdirs(config, workdir),
                                 out_dir / "training_curves.png")
  if curves:
    pictures["training curves"] = curves.name
  bars = plots.ablation_bars(figures, out_dir / "ablations.png")
  if bars:
    pictures["ablations"] = bars.name
  record = example_record(out_dir)
  if record is not None:
    pictures[f"reasoning paths of question {record['id']}"] = (
        plots.reasoning_paths(record, out_dir / "reasoning_paths.png").name)
  s = figures.get("seeds", 1)
  warnings = figures.get("protocol_warnings") or []
  lines = [f"**{figures['llm_headline']}**", ""] if figures.get(
      "llm_headline") else []
  lines += ([f"**Not a held-out evaluation:** {'; '.join(warnings)}.", ""]
            if warnings else [])
  lines += [f"# Evaluation: {figures.get('name')}", "",
           f"Answer run `{workdir}` (step {figures.get('answer_step')}), "
           f"{_llm_phrase(figures)}, GraphAgent "
           f"`{figures.get('graph_agent')}`; {figures.get('questions')} "
           f"questions ({figures.get('labeled')} labeled), {s} seed(s): "
           "every number is the mean ± std over seeds, recomputed from the "
           "per-question JSONL files in this folder.", "",
           *([f"Questions from `{figures['eval_file']}` (sha256 "
              f"`{figures.get('eval_file_sha256')}`).", ""]
             if figures.get("eval_file") else []),
           _protocol_line(figures), "",
           "## Headline", "", "| metric | value |", "|---|---|"]
  for key in qa_metrics.figures_in("headline"):
    if key in figures:
      lines.append(f"| {key} | {_fmt(figures[key], figures.get(key + '_std'))}"
                   " |")
  for key in ("accuracy_answer_head_only", "triples_verified_fraction"):
    if key in figures:
      lines.append(f"| {key} | {_fmt(figures[key])} |")
  if figures.get("labeled") == 0:
    lines += ["", "No question is labelled: accuracy and the other figures "
              "that need a gold answer cannot be computed."]
  gain = figures.get("knowledge_gain")
  if gain:
    low, high = gain["difference_ci95"]
    lines += ["", f"Knowledge gain over the answer head alone (seed 0, "
              f"paired over {gain['questions']} questions): "
              f"{gain['difference']:+.3f}, 95% bootstrap interval "
              f"[{low:+.3f}, {high:+.3f}], McNemar p = "
              f"{gain['mcnemar_p']:.3g} ({gain['b_only_correct']} questions "
              f"only the full system gets right, {gain['a_only_correct']} "
              "only the head alone)."]
  lines += ["", "## Ablations", ""]
  table = figures.get("ablations", {})
  if table:
    lines += ["Δ: to the full system over the same seeds.", "",
              "| system | seeds | accuracy | Δ accuracy | path hit rate | "
              "LLM calls / question | what changes |",
              "|---|---|---|---|---|---|---|",
              f"| full | {s} | "
              f"{_fmt(figures.get('accuracy'), figures.get('accuracy_std'))}"
              f" | – | {_fmt(figures.get('path_hit_rate'))} | "
              f"{_fmt(figures.get('llm_calls_per_question'), digits=2)} | |"]
    for name, row in table.items():
      lines.append(
          f"| {name} | {row.get('seeds', s)} | "
          f"{_fmt(row.get('accuracy'), row.get('accuracy_std'))}"
          f" | {_fmt(row.get('delta_accuracy'))} | "
          f"{_fmt(row.get('path_hit_rate'))} | "
          f"{_fmt(row.get('llm_calls_per_question'), digits=2)} | "
          f"{row.get('description', '')} |")
  for name, why in figures.get("ablations_skipped", {}).items():
    lines.append(f"\nNot run: `{name}` — {why}.")
  lines += ["", "## Efficiency", "", "| figure | value |", "|---|---|"]
  for key in qa_metrics.figures_in("efficiency") + RUN_EFFICIENCY:
    if key in figures:
      lines.append(f"| {key} | {_fmt(figures[key])} |")
  if pictures:
    lines += ["", "## Pictures", ""]
    for title, name in pictures.items():
      lines += [f"**{title}**", "", f"![{title}]({name})", ""]
  return lines
