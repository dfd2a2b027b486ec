"""The knowledge files of retrieved paths, cached beside the refiner run.

``<refiner_workdir>/knowledge/<split>.k<keep>.jsonl`` holds, per question
(in dataset order), the GraphAgent's best ``keep`` paths toward each choice,
as triples with their refiner scores, and the walker's evidence per choice
(:func:`~racer_jax.agents.graph_agent.choice_evidence`: reach frequency,
best reaching log-probability, best refiner score). Written to a temporary file and
renamed, so a crash leaves either no file or a complete one; read back with
the question ids checked against the examples. They are written by
:func:`racer_jax.answer.inputs.dump_split`.
"""

from __future__ import annotations

import json
from pathlib import Path

from racer_jax.knowledge import path_text
from racer_jax.knowledge.path_text import RetrievedPath
from racer_jax.errors import DataError

Knowledge = list[list[list[RetrievedPath]]]  # [question][choice][path]
Evidence = list[list[dict]]  # [question][choice] choice_evidence


def knowledge_file(refiner_workdir, split: str, keep: int) -> Path:
  return Path(refiner_workdir) / "knowledge" / f"{split}.k{keep}.jsonl"


def _records(path: Path, examples):
  """A knowledge file's records; their ids must match ``examples``."""
  out = []
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  if len(lines) != len(examples):
    raise DataError(path, None, None, f"{len(lines)} records for "
                    f"{len(examples)} questions: delete it to rebuild")
  for n, (line, example) in enumerate(zip(lines, examples), 1):
    try:
      record = json.loads(line)
    except json.JSONDecodeError as e:
      raise DataError(path, n, None, f"not JSON: {e}") from e
    if record.get("id") != example.id:
      raise DataError(path, n, "id", f"{record.get('id')!r} but the "
                      f"dataset has {example.id!r} here: delete it to "
                      "rebuild")
    out.append(record)
  return out


def load_split(path: Path, examples) -> Knowledge:
  """Reads a knowledge file's paths; its ids must match ``examples``."""
  return [[[RetrievedPath.from_dict(p) for p in paths]
           for paths in record["choices"]]
          for record in _records(path, examples)]


def load_evidence(path: Path, examples) -> Evidence:
  """Reads a knowledge file's per-choice walker evidence."""
  out = []
  for n, record in enumerate(_records(path, examples), 1):
    if "evidence" not in record:
      raise DataError(path, n, "evidence", "missing (written before the "
                      "walker evidence was kept): delete it to rebuild")
    out.append(record["evidence"])
  return out


def choice_texts(knowledge: Knowledge, max_sentences: int,
                 reached_only: bool = False) -> list[list[str]]:
  """Per question, per choice: the templated knowledge sentences (with
  ``reached_only``, only of paths that reached their choice)."""
  return [[path_text.knowledge_text(
      [p.triples for p in paths if p.reached or not reached_only],
      max_sentences) for paths in choices] for choices in knowledge]


