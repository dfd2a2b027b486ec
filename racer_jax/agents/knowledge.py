"""Retrieved knowledge for whole splits, cached beside the refiner run.

``<refiner_workdir>/knowledge/<split>.k<keep>.jsonl`` holds, per question
(in dataset order), the GraphAgent's best ``keep`` paths toward each choice,
as triples with their refiner scores, and the walker's evidence per choice
(:func:`~racer_jax.agents.graph_agent.choice_evidence`: reach frequency,
best reaching log-probability, best refiner score). Written to a temporary file and
renamed, so a crash leaves either no file or a complete one; read back with
the question ids checked against the examples.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import jax
import ml_collections
import tqdm

from racer_jax.agents.graph_agent import (GraphAgent, RetrievedPath,
                                         choice_evidence)
from racer_jax.agents import templates
from racer_jax.errors import DataError

Knowledge = list[list[list[RetrievedPath]]]  # [question][choice][path]
Evidence = list[list[dict]]  # [question][choice] choice_evidence


def knowledge_file(refiner_workdir, split: str, keep: int) -> Path:
  return Path(refiner_workdir) / "knowledge" / f"{split}.k{keep}.jsonl"


def dump_split(agent: GraphAgent, split_data, path: Path, batch_size: int,
               seed: int, progress: bool = True) -> dict:
  """Retrieves every question of a split and writes ``path``. Returns
  counts: questions, paths, triples and verified triples."""
  examples = split_data.examples
  rows: dict[int, list] = {}
  evidence: dict[int, list] = {}
  dataset = split_data.dataset
  for i, batch in enumerate(tqdm.tqdm(
      dataset.ordered_batches(batch_size), desc=f"retrieve {path.stem}",
      total=dataset.batches_per_epoch(batch_size), disable=not progress)):
    out, per_row = agent.retrieve(batch, jax.random.fold_in(
        jax.random.PRNGKey(seed), i))
    for b, choices in enumerate(per_row):
      if choices is not None:
        rows[int(batch.example_index[b])] = choices
        evidence[int(batch.example_index[b])] = choice_evidence(
            out, b, len(choices))
  stats = {"questions": len(examples), "paths": 0, "triples": 0,
           "verified_triples": 0}
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_suffix(".tmp")
  with open(tmp, "w", encoding="utf-8") as f:
    for index, example in enumerate(examples):
      choices = rows.get(index) or [[] for _ in example.choices]
      choices = (choices + [[] for _ in example.choices])[:len(
          example.choices)]
      for paths in choices:
        stats["paths"] += len(paths)
        for p in paths:
          stats["triples"] += len(p.triples)
          stats["verified_triples"] += len(p.triples) if p.verified else 0
      none = {"walks": 0, "reached": 0, "distinct": 0,
              "best_log_prob": None, "best_score": None}
      seen = (evidence.get(index, []) + [none] * len(example.choices))[
          :len(example.choices)]
      f.write(json.dumps({"id": example.id, "choices": [
          [p.to_dict() for p in paths] for paths in choices],
                          "evidence": seen}) + "\n")
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  return stats


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


def ensure_knowledge(refiner_workdir, data_dir, splits, *, keep: int,
                     batch_size: int, seed: int, progress: bool = True,
                     log: Callable[[str], None] = print,
                     evidence: bool = False) -> dict:
  """Knowledge for ``splits`` from the refiner run, retrieved once and
  cached. Returns ``{split: Knowledge}`` (with ``evidence``: ``{split:
  Evidence}``)."""
  from racer_jax.driver import common
  from racer_jax.driver.inputs import load_workspace
  refiner_workdir = Path(refiner_workdir)
  missing = [s for s in splits
             if not knowledge_file(refiner_workdir, s, keep).exists()]
  rconfig = ml_collections.ConfigDict(json.loads(
      (refiner_workdir / "config.json").read_text()))
  ws = load_workspace(rconfig, data_dir,
                      common.prep_dir_of(rconfig, refiner_workdir),
                      list(splits), progress=progress, log=log)
  if missing:
    agent = GraphAgent(refiner_workdir, ws, paths_per_choice=keep, log=log)
    for split in missing:
      path = knowledge_file(refiner_workdir, split, keep)
      stats = dump_split(agent, ws.splits[split], path, batch_size, seed,
                         progress)
      log(f"{path}: {stats}")
  load = load_evidence if evidence else load_split
  return {s: load(knowledge_file(refiner_workdir, s, keep),
                  ws.splits[s].examples) for s in splits}


def choice_texts(knowledge: Knowledge, max_sentences: int,
                 reached_only: bool = False) -> list[list[str]]:
  """Per question, per choice: the templated knowledge sentences (with
  ``reached_only``, only of paths that reached their choice)."""
  return [[templates.knowledge_text(
      [p.triples for p in paths if p.reached or not reached_only],
      max_sentences) for paths in choices] for choices in knowledge]


def evidence_for(config, data_dir, splits, progress, log):
  """``{split: [Q][C] walker evidence}`` for an answer run's config from
  the refiner run in ``answer.evidence_workdir`` (its knowledge files,
  built once), or None without one."""
  a = config.answer
  if not a.get("evidence_workdir", ""):
    return None
  return ensure_knowledge(a.evidence_workdir, data_dir, splits,
                          keep=a.paths_per_choice,
                          batch_size=config.eval.batch_size, seed=config.seed,
                          progress=progress, log=log, evidence=True)
