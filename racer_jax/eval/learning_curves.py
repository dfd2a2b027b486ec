"""Learning speed from logged evaluation curves: how many updates each run
needs to reach a hit rate, and where it ends (the curriculum-vs-uniform and
teacher-vs-no-teacher comparisons).

Each run is a walker workdir trained with ``train.eval_every > 0``, whose
``metrics.jsonl`` holds ``eval/<key>`` rows. Runs given as
``label=DIR`` pairs; several runs with one label (seeds) are averaged:
mean ± std of the final value and of the updates to reach the target
(a seed that never reaches it counts as not reached, reported apart).
:func:`curriculum_comparison` trains the walker both ways per seed and
compares them (``launch/curriculum.py``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import numpy as np

from racer_jax.eval import plots
from racer_jax.runs.config_checks import check_config
from racer_jax.walker import stage as walker_stage


def eval_curve(workdir, key: str = "path_hit_rate") -> list[tuple[int, float]]:
  """``[(step, value)]`` of ``eval/<key>`` in a run's ``metrics.jsonl``."""
  rows = plots.read_metrics(Path(workdir) / "metrics.jsonl")
  curve = [(int(r["step"]), float(r["eval/" + key])) for r in rows
           if "eval/" + key in r]
  if not curve:
    raise ValueError(f"{workdir}/metrics.jsonl has no eval/{key} rows: "
                     "train with --config.train.eval_every=N")
  return sorted(curve)


def updates_to_reach(curve, target: float) -> int | None:
  """The first evaluated step whose value is ≥ ``target`` (None: never)."""
  return next((s for s, v in curve if v >= target), None)


def compare(runs: list[tuple[str, str]], *, key: str = "path_hit_rate",
            target: float | None = None) -> dict:
  """The comparison table. ``target`` defaults to 95% of the lowest final
  value over all runs, so every label has a number to compare."""
  curves = [(label, Path(d), eval_curve(d, key)) for label, d in runs]
  if target is None:
    target = 0.95 * min(c[-1][1] for _, _, c in curves)
  by_label: dict[str, dict] = {}
  for label, d, curve in curves:
    row = by_label.setdefault(label, {"runs": [], "final": [], "reach": []})
    row["runs"].append(str(d))
    row["final"].append(curve[-1][1])
    row["reach"].append(updates_to_reach(curve, target))
  table = {}
  for label, row in by_label.items():
    reached = [r for r in row["reach"] if r is not None]
    table[label] = {
        "seeds": len(row["runs"]), "runs": row["runs"],
        "final_" + key: float(np.mean(row["final"])),
        "final_" + key + "_std": float(np.std(row["final"])),
        "updates_to_target": float(np.mean(reached)) if reached else None,
        "updates_to_target_std": float(np.std(reached)) if reached else None,
        "seeds_reaching_target": len(reached)}
  return {"key": key, "target": float(target), "runs": table}


def plot_curves(runs: list[tuple[str, str]], out, *, key="path_hit_rate",
                target: float | None = None):
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(6, 3.6))
  colors = {}
  for label, d in runs:
    curve = eval_curve(d, key)
    color = colors.setdefault(label, f"C{len(colors)}")
    xs, ys = zip(*curve)
    first = sum(1 for lab, _ in runs[:runs.index((label, d))] if lab == label)
    ax.plot(xs, ys, color=color, alpha=0.8,
            label=label if first == 0 else None)
  if target is not None:
    ax.axhline(target, color="k", lw=0.8, ls="--", label=f"target {target:.3f}")
  ax.set_xlabel("update")
  ax.set_ylabel(key.replace("_", " "))
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(out, dpi=110)
  plt.close(fig)
  return out


def write_comparison(runs, out_dir, *, key="path_hit_rate", target=None
                     ) -> dict:
  """``compare`` + ``learning_curves.png`` + ``comparison.md`` +
  ``comparison.json`` in ``out_dir``."""
  out_dir = Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  result = compare(runs, key=key, target=target)
  plot_curves(runs, out_dir / "learning_curves.png", key=key,
              target=result["target"])
  lines = [f"# Learning speed: {key}", "",
           f"Target {key} = {result['target']:.3f}; mean ± std over seeds.",
           "", f"| run | seeds | final {key} | updates to target | "
           "seeds reaching it |", "|---|---|---|---|---|"]
  for label, row in result["runs"].items():
    reach = ("never" if row["updates_to_target"] is None else
             f"{row['updates_to_target']:.0f} ± "
             f"{row['updates_to_target_std']:.0f}")
    lines.append(f"| {label} | {row['seeds']} | "
                 f"{row['final_' + key]:.3f} ± "
                 f"{row['final_' + key + '_std']:.3f} | {reach} | "
                 f"{row['seeds_reaching_target']}/{row['seeds']} |")
  lines += ["", "![learning curves](learning_curves.png)", ""]
  (out_dir / "comparison.md").write_text("\n".join(lines))
  (out_dir / "comparison.json").write_text(json.dumps(result, indent=1))
  return result


def curriculum_comparison(config, data_dir, root, seeds, *, eval_every: int,
                          target: float | None = None, progress=True,
                          log: Callable[[str], None] = print) -> dict:
  """GraphDancer's easy-to-hard sampler against uniform epochs: the walker
  trained both ways per seed in ``root/{uniform,curriculum}_seed{s}`` (the
  same budget; finished runs are reused), the greedy hit rate evaluated
  every ``eval_every`` updates; writes ``root/comparison.md`` and the
  learning curves and returns the comparison's figures."""
  check_config(config)
  if eval_every < 1:
    raise ValueError(f"--eval_every={eval_every} must be >= 1")
  root = os.path.abspath(root)
  runs = []
  for seed in seeds:
    for label, enabled in (("uniform", False), ("curriculum", True)):
      run_config = config.copy_and_resolve_references()
      with run_config.unlocked():
        run_config.seed = seed
        run_config.curriculum.enabled = enabled
        run_config.train.eval_every = eval_every
        if not run_config.prep_dir:
          run_config.prep_dir = os.path.join(root, "prep")
      workdir = os.path.join(root, f"{label}_seed{seed}")
      log(f"=== {label}, seed {seed} -> {workdir}")
      walker_stage.train(run_config, data_dir, workdir, progress=progress)
      runs.append((label, workdir))
  return write_comparison(runs, root, target=target)

