"""Pictures (matplotlib, written as PNG without a display): training curves
from a run's ``metrics.jsonl``, the ablation bar chart, and the reasoning
paths of one answered question."""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Curves worth a panel, by the stage that logs them (first found wins).
CURVES = ("train/walker_hit_rate", "train/question_hit_rate",
          "train/return", "train/loss", "train/gold_in_topk",
          "train/accuracy", "eval/accuracy", "train/recall")


def read_metrics(path: Path) -> list[dict]:
  """The JSON lines of a ``metrics.jsonl`` (torn lines skipped)."""
  rows = []
  if not Path(path).exists():
    return rows
  for line in Path(path).read_text(encoding="utf-8").splitlines():
    try:
      rows.append(json.loads(line))
    except json.JSONDecodeError:
      continue
  return rows


def training_curves(runs: dict[str, Path], out: Path) -> Path | None:
  """One panel per (run, logged metric in :data:`CURVES`) against step;
  None when no run logged any of them."""
  panels = []
  for label, workdir in runs.items():
    rows = read_metrics(Path(workdir) / "metrics.jsonl")
    for key in CURVES:
      pts = [(r["step"], r[key]) for r in rows
             if key in r and "step" in r and r[key] is not None]
      if len(pts) >= 1:
        panels.append((f"{label}: {key.split('/', 1)[1]}", pts))
  if not panels:
    return None
  cols = min(3, len(panels))
  rows_n = math.ceil(len(panels) / cols)
  fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3 * rows_n),
                           squeeze=False)
  for ax, (title, pts) in zip(axes.flat, panels):
    xs, ys = zip(*pts)
    ax.plot(xs, ys, marker="." if len(xs) < 30 else None)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("update")
    ax.grid(alpha=0.3)
  for ax in list(axes.flat)[len(panels):]:
    ax.axis("off")
  fig.tight_layout()
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out


def ablation_bars(figures: dict, out: Path) -> Path | None:
  """Accuracy (± std over seeds) of the full system and each ablation."""
  rows = [("full", figures.get("accuracy"), figures.get("accuracy_std", 0))]
  for name, row in figures.get("ablations", {}).items():
    rows.append((name, row.get("accuracy"), row.get("accuracy_std", 0)))
  rows = [r for r in rows if r[1] is not None]
  if len(rows) < 2:
    return None
  fig, ax = plt.subplots(figsize=(1.1 * len(rows) + 2, 3.4))
  names, acc, std = zip(*rows)
  colors = ["#1f77b4"] + ["#aaaaaa"] * (len(rows) - 1)
  ax.bar(names, acc, yerr=std, color=colors, capsize=3)
  ax.axhline(acc[0], color="#1f77b4", lw=0.8, ls="--")
  ax.set_ylabel("accuracy")
  ax.set_title(f"ablations ({figures.get('name', '')}, "
               f"{figures.get('seeds', 1)} seed(s))", fontsize=10)
  ax.tick_params(axis="x", rotation=30)
  fig.tight_layout()
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out


# a chain's colour: evidence for the chosen choice (green when right, red
# when wrong), for another choice, or a walk that never reached its choice
RIGHT, WRONG, OTHER, UNREACHED = "#2ca02c", "#d62728", "#7f7f7f", "#bbbbbb"


def chain_style(choice: int, pred: int, gold, reached: bool
                ) -> tuple[str, str, float]:
  """``(colour, line style, width)`` of one drawn walk: only a walk that
  reached its choice is drawn as evidence (solid, in the choice's colour);
  one that ended elsewhere is dotted light grey."""
  if not reached:
    return UNREACHED, ":", 0.8
  if choice != pred:
    return OTHER, "-", 0.8
  return (RIGHT if pred == gold else WRONG), "-", 1.5


def reasoning_paths(record: dict, out: Path, max_paths: int = 3
                    ) -> Path:
  """Draws one answered question (a record of the per-question JSONL, or
  ``QuestionResult.to_dict()``) into ``out``: see
  :func:`reasoning_paths_figure`."""
  fig = reasoning_paths_figure(record, max_paths)
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return Path(out)


def reasoning_paths_figure(record: dict, max_paths: int = 3):
  """Question concepts on the left, the choices' concepts on the right,
  each shown path of the deciding round as a chain of labeled edges
  (:func:`chain_style`); the chosen choice in green (red if it is wrong),
  the gold one in bold."""
  rnd = record["rounds"][record["deciding_turn"]]
  pred, gold = record["prediction"], record.get("gold")
  chains = []  # (choice, [(head, relation, tail), ...], reached)
  for c, paths in enumerate(rnd["paths"]):
    for p in paths[:max_paths]:
      chains.append((c, [(t["head"], t["relation"], t["tail"])
                         for t in p["triples"]], p["reached"]))
  depth = max([len(t) for _, t, _ in chains] + [1])
  fig_h = max(3.0, 0.55 * (len(chains) + len(record["choices"])) + 1.2)
  fig, ax = plt.subplots(figsize=(3.2 * (depth + 1) + 1.5, fig_h))
  ax.axis("off")
  y = 0
  for c, triples, reached in chains:
    color, style, width = chain_style(c, pred, gold, reached)
    xs = list(range(len(triples) + 1))
    nodes = [triples[0][0]] + [t[2] for t in triples]
    ax.plot(xs, [y] * len(xs), color=color, ls=style, lw=width, zorder=1)
    for i, (x, name) in enumerate(zip(xs, nodes)):
      ax.text(x, y, name.replace("_", " "), ha="center", va="center",
              fontsize=8, zorder=2,
              bbox=dict(boxstyle="round,pad=0.25", fc="white",
                        ec=color if i else "#1f77b4"))
    for i, (_, rel, _) in enumerate(triples):
      ax.text(i + 0.5, y + 0.18, rel, ha="center", va="bottom", fontsize=7,
              color=color)
    ax.text(depth + 0.6, y, f"→ {record['choices'][c]}"
            + ("" if reached else " (not reached)"), va="center",
            fontsize=8, color=color)
    y -= 1
  y -= 0.3
  for c, text in enumerate(record["choices"]):
    mark = (" ✓ chosen" if c == pred else "") + (" (gold)" if c == gold
                                                  else "")
    ax.text(0, y, f"{c}. {text}{mark}", fontsize=9,
            color=RIGHT if c == pred and c == gold else
            WRONG if c == pred else "black",
            fontweight="bold" if c == gold else "normal")
    y -= 0.5
  ax.set_xlim(-0.8, depth + 2.2)
  ax.set_ylim(y - 0.2, 0.8)
  ax.set_title(record["question"], fontsize=10, loc="left")
  fig.tight_layout()
  return fig
