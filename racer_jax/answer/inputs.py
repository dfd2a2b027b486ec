"""The answer models' inputs: a split's questions with the knowledge each
choice is shown, assembled from runs.

Per question and choice: the training questions most like it (KEAR), the
open book's facts, the choice's own KG triples and the GraphAgent's refined
paths toward it as sentences (:func:`knowledge_for`), and the whole-graph
walker's evidence (:func:`evidence_for`). The refined paths are retrieved
once by a :class:`~racer_jax.agents.graph_agent.GraphAgent` and cached beside
the refiner run (:mod:`racer_jax.knowledge.knowledge_text` reads them back).
The cross-encoder reads a split tokenized (:class:`AnswerData`), the frozen
head its MiniLM vectors (:func:`cached_features`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import jax
import numpy as np
import tqdm

from racer_jax.agents.graph_agent import (NO_EVIDENCE, GraphAgent,
                                          choice_evidence)
from racer_jax.answer import choice_head
from racer_jax.data import datasets, qa
from racer_jax.knowledge import choice_triples, openbook, similar_questions
from racer_jax.knowledge.knowledge_text import (knowledge_file, load_evidence,
                                                load_split)
from racer_jax.runs import builders
from racer_jax.runs.workspace import load_workspace, make_encoder
from racer_jax.runs import run_config


def dump_split(agent: GraphAgent, split_data, path: Path, batch_size: int,
               seed: int, progress: bool = True) -> dict:
  """Retrieves every question of a split and writes ``path``. Returns
  counts: questions, paths, triples and verified triples."""
  examples = split_data.examples
  rows: dict[int, list] = {}
  evidence: dict[int, list] = {}
  dataset = split_data.dataset
  for batch in tqdm.tqdm(
      dataset.ordered_batches(batch_size), desc=f"retrieve {path.stem}",
      total=dataset.batches_per_epoch(batch_size), disable=not progress):
    out, per_row = agent.retrieve(batch, jax.random.PRNGKey(seed))
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
      seen = (evidence.get(index, []) +
              [dict(NO_EVIDENCE) for _ in example.choices])[
          :len(example.choices)]
      f.write(json.dumps({"id": example.id, "choices": [
          [p.to_dict() for p in paths] for paths in choices],
                          "evidence": seen}) + "\n")
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)
  return stats


def ensure_knowledge(refiner_workdir, data_dir, splits, *, keep: int,
                     batch_size: int, seed: int, progress: bool = True,
                     log: Callable[[str], None] = print,
                     evidence: bool = False) -> dict:
  """Knowledge for ``splits`` from the refiner run, retrieved once and
  cached. Returns ``{split: Knowledge}`` (with ``evidence``: ``{split:
  Evidence}``)."""
  refiner_workdir = Path(refiner_workdir)
  missing = [s for s in splits
             if not knowledge_file(refiner_workdir, s, keep).exists()]
  rconfig = run_config.load(refiner_workdir, "refiner run")
  ws = load_workspace(rconfig, data_dir,
                      builders.prep_dir_of(rconfig, refiner_workdir),
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


def _knowledge_of_run(config, field, data_dir, splits, progress, log,
                      evidence=False):
  """:func:`ensure_knowledge` of the refiner run named by
  ``config.answer.<field>`` with the answer run's settings, or None when
  the field is empty."""
  a = config.answer
  if not a.get(field, ""):
    return None
  return ensure_knowledge(a[field], data_dir, splits,
                          keep=a.paths_per_choice,
                          batch_size=config.eval.batch_size, seed=config.seed,
                          progress=progress, log=log, evidence=evidence)


def evidence_for(config, data_dir, splits, progress, log):
  """``{split: [Q][C] walker evidence}`` for an answer run's config from
  the refiner run in ``answer.evidence_workdir`` (its knowledge files,
  built once), or None without one."""
  return _knowledge_of_run(config, "evidence_workdir", data_dir, splits,
                           progress, log, evidence=True)


def graph_paths_for(config, data_dir, splits, progress, log):
  """``{split: [Q][C] [RetrievedPath]}``: the refined paths the graph head
  reads (``answer.graph_workdir``, its knowledge files, built once), or
  None without one."""
  return _knowledge_of_run(config, "graph_workdir", data_dir, splits,
                           progress, log)


def knowledge_for(config, data_dir, splits, progress, log, cache_dir=None):
  """``{split: [Q][C] knowledge text}``: the training questions most like
  the question (``answer.similar_questions``; their index vectors cached in
  ``cache_dir``), the open book's facts (``use_openbook``), then per choice
  its own KG triples (``answer.choice_triples``) and the refined paths'
  sentences (``answer.knowledge_workdir``); ``None`` with none of them."""
  a = config.answer
  paths = None  # {split: [Q][C] [RetrievedPath]}
  if a.knowledge_workdir:
    paths = ensure_knowledge(
        a.knowledge_workdir, data_dir, splits, keep=a.paths_per_choice,
        batch_size=config.eval.batch_size, seed=config.seed,
        progress=progress, log=log)
    if a.reached_only:
      paths = {s: [[[p for p in ps if p.reached] for ps in choices]
                   for choices in k] for s, k in paths.items()}
  grounded = None  # (workspace, its config), loaded once for both below
  if a.choice_triples > 0 or config.use_openbook:
    grounded = _knowledge_workspace(config, data_dir, splits, progress, log)
  own = None  # the same for each choice's own triples
  if a.choice_triples > 0:
    own = choice_triples_for(config, grounded, splits, log)
  texts = None
  if paths is not None or own is not None:
    either = paths or own
    texts = {s: [[choice_triples.knowledge_text(
        own[s][q][j] if own else [], paths[s][q][j] if paths else [],
        a.max_sentences) for j in range(len(row))]
                 for q, row in enumerate(either[s])] for s in splits}
  if config.use_openbook:
    facts = openbook_texts(config, data_dir, grounded, splits, log)
    texts = {s: openbook.join_knowledge(facts[s], texts and texts[s])
             for s in splits}
  if a.similar_questions > 0:
    sim = similar_questions.for_run(config, data_dir, cache_dir, log)
    texts = {s: openbook.join_knowledge(
        sim.per_choice(load_examples(config, data_dir, s),
                       a.similar_questions), texts and texts[s])
             for s in splits}
  return texts


def knowledge_sources(config) -> str:
  """The knowledge the answer model is shown, in words (for the log)."""
  a = config.answer
  parts = [f"{a.similar_questions} similar training questions"
           if a.similar_questions > 0 else "",
           "the open book" if config.use_openbook else "",
           f"{a.choice_triples} triples per choice"
           if a.choice_triples > 0 else "",
           f"paths from {a.knowledge_workdir}" if a.knowledge_workdir else "",
           f"walker evidence from {a.evidence_workdir}"
           if a.evidence_workdir else "",
           f"the graph of the paths from {a.graph_workdir}"
           if a.graph_workdir else ""]
  return ", ".join(p for p in parts if p)


def _knowledge_workspace(config, data_dir, splits, progress, log):
  """``(workspace, its config)`` the extra knowledge is grounded in: the
  retrieval run's (``answer.knowledge_workdir``), else this run's own
  prepared data (``prep_dir``)."""
  source = config
  if not (config.answer.knowledge_workdir or config.prep_dir):
    raise ValueError("use_openbook or answer.choice_triples without "
                     "answer.knowledge_workdir needs --config.prep_dir (the "
                     "prepared store to ground in)")
  if config.answer.knowledge_workdir:
    source = run_config.load(config.answer.knowledge_workdir,
                             "refiner run (answer.knowledge_workdir)")
  ws = load_workspace(source, data_dir, builders.prep_dir_of(
      source, config.answer.knowledge_workdir), list(splits),
      progress=progress, log=log)
  return ws, source


def choice_triples_for(config, grounded, splits, log):
  """``{split: [Q][C] [RetrievedPath]}``: each choice's own KG triples;
  ``grounded`` from :func:`_knowledge_workspace`."""
  ws, source = grounded
  ranker = choice_triples.ChoiceTriples(ws.kg, ws.concept_emb,
                                        make_encoder(source))
  k = config.answer.choice_triples
  out = {s: ranker.split(ws.splits[s].examples, ws.splits[s].subgraphs, k)
         for s in splits}
  shown = sum(len(c) for rows in out.values() for r in rows for c in r)
  total = sum(len(r) for rows in out.values() for r in rows)
  log(f"choice triples: {shown} for {total} choices (at most {k} each)")
  return out


def openbook_texts(config, data_dir, grounded, splits, log):
  """``{split: [Q][C] open-book facts}`` over the retrieval run's store
  (or this run's own prepared data without one); ``grounded`` from
  :func:`_knowledge_workspace`."""
  ws, source = grounded
  book = openbook.make_openbook(config, data_dir, ws, make_encoder(source))
  k = config.openbook.facts_per_choice
  out = {s: book.split_texts(ws.splits[s].examples, ws.splits[s].subgraphs,
                             k) for s in splits}
  shown = sum(bool(t) for rows in out.values() for r in rows for t in r)
  total = sum(len(r) for rows in out.values() for r in rows)
  log(f"open book: {len(book.facts)} facts; {shown}/{total} choices got "
      f"at least one")
  return out


@dataclasses.dataclass
class AnswerData:
  """A split, tokenized: per question ``(ids, type_ids)`` per choice."""
  examples: list
  tokens: list
  gold: np.ndarray        # int32 [Q], -1 unlabeled
  num_choices: int
  knowledge: list | None  # [Q][C] sentences, None without knowledge

  def batch(self, tokenizer, rows):
    """(tokens [B, C, T] x3, choice_mask [B, C], gold [B], mask [B]);
    ``rows`` may hold -1 for padding questions."""
    rows = list(rows)
    real = [self.tokens[r] if r >= 0 else ([], []) for r in rows]
    tokens = tokenizer.pad(real, self.num_choices)
    choice_mask = tokens[2][:, :, 0]
    gold = np.array([self.gold[r] if r >= 0 else -1 for r in rows],
                    np.int32)
    return tokens, choice_mask, gold, np.array(rows) >= 0

  def subset(self, rows) -> "AnswerData":
    """The questions ``rows`` (e.g. the validation slice), in that order."""
    rows = [int(r) for r in rows]
    return AnswerData([self.examples[r] for r in rows],
                      [self.tokens[r] for r in rows], self.gold[rows],
                      self.num_choices,
                      [self.knowledge[r] for r in rows]
                      if self.knowledge else None)


def load_answer_data(config, data_dir, split: str, tokenizer,
                     knowledge=None) -> AnswerData:
  path = datasets.split_path(config, split, datasets.resolve_data_dir(
      data_dir))
  examples = load_examples(config, data_dir, split)
  c = config.batch.num_choices
  too_many = [e.id for e in examples if len(e.choices) > c]
  if too_many:
    raise ValueError(f"{path}: {len(too_many)} questions have more than "
                     f"batch.num_choices={c} choices (e.g. {too_many[0]})")
  tokens = [tokenizer.encode(e.stem, e.choices,
                             knowledge[i] if knowledge else None)
            for i, e in enumerate(examples)]
  gold = np.array([-1 if e.answer_index is None else e.answer_index
                   for e in examples], np.int32)
  return AnswerData(examples, tokens, gold, c, knowledge)


def load_examples(config, data_dir, split: str) -> list:
  path = datasets.split_path(config, split, datasets.resolve_data_dir(
      data_dir))
  return qa.load_jsonl(path, on_bad_line=config.data.on_bad_line)[0]


def accuracy(probs: np.ndarray, gold: np.ndarray) -> float:
  keep = gold >= 0
  return float(np.mean(np.argmax(probs[keep], -1) == gold[keep])) if (
      keep.any()) else 0.0


def write_predictions(path: Path, data: AnswerData, probs: np.ndarray):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    for i, e in enumerate(data.examples):
      f.write(json.dumps({
          "id": e.id, "gold": int(data.gold[i]),
          "prediction": int(np.argmax(probs[i])),
          "probs": [round(float(p), 5) for p in probs[i][:len(e.choices)]],
          **({"knowledge": data.knowledge[i]} if data.knowledge else {}),
      }) + "\n")


def cached_features(path: Path, encoder, examples, knowledge, num_choices):
  """:func:`choice_head.encode_features`, reused from ``path`` when it was
  made from exactly these texts."""
  texts = json.dumps([[e.stem, list(e.choices)] for e in examples] +
                     [knowledge or []])
  digest = hashlib.sha256(texts.encode()).hexdigest()
  if path.exists():
    with np.load(path) as f:
      if str(f["digest"]) == digest:
        return f["q"], f["c"], f["k"], f["mask"]
  q, c, k, mask = choice_head.encode_features(
      encoder, [e.stem for e in examples], [list(e.choices) for e in examples],
      knowledge, num_choices)
  tmp = path.with_suffix(".tmp.npz")
  np.savez(tmp, q=q, c=c, k=k, mask=mask, digest=digest)
  tmp.replace(path)
  return q, c, k, mask
