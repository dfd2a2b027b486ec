"""Where an evaluation's outputs go: one folder, laid out alike for every run
kind.

Every evaluation — the walker (subgraph or whole graph), the refiner, HyGRL's
retrieval, the answer model alone, the agents, the multi-hop retriever,
GraphDancer's explorer and the LM's knowledge arms — writes
``<workdir>/eval/<name>/``:

* ``questions.jsonl`` — one record per evaluated question (``{"id": ...,
  ...}``), flushed and fsynced when closed; evaluations with several passes
  (the agents' seeds and ablations, ensemble members) add their own JSONL
  files beside it;
* ``metrics.json`` — the figures, written last and atomically (so a folder
  with a ``metrics.json`` holds a finished evaluation), also returned; the
  launchers print them as their last JSON line;
* ``report.md`` — the figures for a person: a table of the scalar figures,
  unless the evaluation writes a richer report of its own (the agents').

``name`` says what was evaluated: ``<split>_step<N>`` (walker),
``<split>_step<N>.refiner``, ``<split>_step<N>.retrieval`` (HyGRL on CSQA),
``<split>.answer_only``, ``<dataset>_<split>`` (multi-hop retrieval),
``<split>[.<llm>]`` (the agents), ``....explorer_only.first<n>``,
``<split>/lm_knowledge/...``. Opening an output removes the last run's
``metrics.json`` and ``report.md`` first, so a stopped evaluation never leaves
old figures beside new records.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Callable, Iterator, TextIO

from racer_jax.data.prepare import write_json

QUESTIONS = "questions.jsonl"
METRICS = "metrics.json"
REPORT = "report.md"


class EvalOutput:
  """The folder ``<workdir>/eval/<name>/`` of one evaluation."""

  def __init__(self, workdir, name: str):
    self.dir = Path(workdir) / "eval" / name
    self.dir.mkdir(parents=True, exist_ok=True)
    for stale in (METRICS, REPORT):
      (self.dir / stale).unlink(missing_ok=True)

  @property
  def questions_path(self) -> Path:
    return self.dir / QUESTIONS

  @contextlib.contextmanager
  def questions(self, file: str = QUESTIONS) -> Iterator[TextIO]:
    """Yields ``file`` open for writing (one JSON line per question);
    flushed and fsynced when the block ends."""
    with open(self.dir / file, "w", encoding="utf-8") as f:
      yield f
      f.flush()
      os.fsync(f.fileno())

  def finish(self, figures: dict, *, title: str | None = None,
             report: list[str] | None = None,
             log: Callable[[str], None] | None = None) -> dict:
    """Writes ``metrics.json`` (with ``out_dir``) and ``report.md``
    (``report``'s lines, else a table of ``figures``' scalars under
    ``title``); returns the figures written."""
    if (title is None) == (report is None):
      raise ValueError("finish() takes a title (for the table) or a report")
    figures = {**figures, "out_dir": str(self.dir)}
    if (self.dir / QUESTIONS).exists():
      figures.setdefault("per_question_file", str(self.dir / QUESTIONS))
    write_json(self.dir / METRICS, figures)
    lines = report if report is not None else figures_table(title, figures)
    (self.dir / REPORT).write_text("\n".join(lines) + "\n", encoding="utf-8")
    if log is not None:
      log(f"evaluation: {self.dir}")
    return figures


def figures_table(title: str, figures: dict) -> list[str]:
  """``report.md``'s lines: a title and a table of the scalar figures (lists
  and tables stay in ``metrics.json``)."""
  lines = [f"# {title}", "", "| figure | value |", "|---|---|"]
  for key, value in figures.items():
    if isinstance(value, bool) or value is None:
      lines.append(f"| {key} | {value} |")
    elif isinstance(value, float):
      lines.append(f"| {key} | {value:.4g} |")
    elif isinstance(value, (int, str)):
      lines.append(f"| {key} | {value} |")
  lines += ["", f"Per-question records, lists and tables: `{QUESTIONS}`, "
            f"`{METRICS}`."]
  return lines


def finished(workdir, name: str) -> dict | None:
  """The figures of a finished evaluation ``name`` of ``workdir``, or None."""
  path = Path(workdir) / "eval" / name / METRICS
  return json.loads(path.read_text()) if path.exists() else None


def newest_step(workdir, split: str) -> dict | None:
  """The figures of ``workdir``'s finished evaluation ``<split>_step<N>``
  of the largest N (a walker's), or None."""
  steps = [int(p.parent.name[len(split) + 5:]) for p in
           (Path(workdir) / "eval").glob(f"{split}_step*/{METRICS}")
           if p.parent.name[len(split) + 5:].isdigit()]
  return finished(workdir, f"{split}_step{max(steps)}") if steps else None
