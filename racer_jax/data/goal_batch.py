"""Fixed-shape question batches for the walker.

The walker needs no subgraph: per question, only the grounded
concept ids (global) of the question and of each choice, the question's
embedding and the gold index. :class:`GoalDataset` pads them to
``[B, Q]`` / ``[B, C, A]`` (one shape for every batch, so every program
compiles once) and serves deterministic shuffled epochs as
:class:`~racer_jax.data.bucketed.BucketedDataset` does. Concepts beyond the
caps are cut and counted in :attr:`GoalDataset.report`; the grounding comes
from the prepared ``<split>.grounded.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, Sequence

import flax.struct
import numpy as np


@flax.struct.dataclass
class GoalBatch:
  """B questions.

  Attributes:
    question_concepts: int32 [B, Q] global concept ids, -1 padding.
    choice_concepts: int32 [B, C, A] per choice, -1 padding.
    choice_valid: bool [B, C] the choice exists and has a concept.
    query: float32 [B, d] question embeddings.
    gold: int32 [B] (-1 unlabeled); example_mask: bool [B];
    example_index: int32 [B] index in the dataset's split, -1 padding.
  """
  question_concepts: np.ndarray
  choice_concepts: np.ndarray
  choice_valid: np.ndarray
  query: np.ndarray
  gold: np.ndarray
  example_mask: np.ndarray
  example_index: np.ndarray


def read_grounded(path, kg) -> list[dict]:
  """The prepared grounding: per question ``question`` (int32 ids) and
  ``choices`` (a list of int32 id arrays), as the walkers use them: each
  choice's concepts sorted and unique; the question's, sorted and unique,
  without the concepts of any choice (a walk that starts on a choice
  explains nothing). The same sets, in the same order, as a question's
  subgraph marks (:mod:`racer_jax.kg.subgraph`), so the walker trained on
  these batches and the refiner reading subgraph batches agree."""
  rows = []
  with open(path, encoding="utf-8") as f:
    for line_no, line in enumerate(f, 1):
      try:
        row = json.loads(line)
        ids = lambda names: np.asarray([kg.concept_id(n) for n in names],
                                       np.int32)
        choices = [np.unique(ids(c)) for c in row["choice_concepts"]]
        question = np.unique(ids(row["question_concepts"]))
        if choices:
          question = question[~np.isin(question, np.concatenate(choices))]
        rows.append({"question": question.astype(np.int32),
                     "choices": [c.astype(np.int32) for c in choices]})
      except (KeyError, ValueError) as e:
        raise ValueError(f"{path}:{line_no}: bad grounding row ({e}); "
                         "delete the prepared folder's meta files to "
                         "rebuild") from e
  return rows


class GoalDataset:
  """The questions ``ids`` of a split as padded goal batches."""

  def __init__(self, grounded: Sequence[dict], answers: Sequence[int | None],
               query: np.ndarray, ids: Sequence[int], *,
               max_question_concepts: int, max_choice_concepts: int,
               num_choices: int):
    self.ids = np.asarray(ids, np.int64)
    n, q, a, c = len(self.ids), max_question_concepts, max_choice_concepts, (
        num_choices)
    self.question_concepts = np.full((n, q), -1, np.int32)
    self.choice_concepts = np.full((n, c, a), -1, np.int32)
    self.gold = np.full((n,), -1, np.int32)
    cut_q = cut_a = cut_c = 0
    for row, i in enumerate(self.ids):
      g = grounded[i]
      qc = g["question"]
      self.question_concepts[row, :min(q, qc.size)] = qc[:q]
      cut_q += qc.size > q
      cut_c += len(g["choices"]) > c
      for j, cc in enumerate(g["choices"][:c]):
        self.choice_concepts[row, j, :min(a, cc.size)] = cc[:a]
        cut_a += cc.size > a
      if answers[i] is not None:
        self.gold[row] = answers[i]
    self.query = np.asarray(query, np.float32)[self.ids]
    self.report = {"questions": n, "question_concepts_cut": int(cut_q),
                   "choice_concepts_cut": int(cut_a),
                   "choices_cut": int(cut_c),
                   "without_question_concept": int(
                       (self.question_concepts[:, 0] < 0).sum())}

  def __len__(self) -> int:
    return int(self.ids.shape[0])

  def batches_per_epoch(self, batch_size: int) -> int:
    return -(-len(self) // batch_size)

  def batch(self, positions, batch_size: int, rows: slice | None = None
            ) -> GoalBatch:
    """The questions at ``positions`` (dataset rows), padded to
    ``batch_size``; ``rows`` keeps a slice of the batch (a process's)."""
    positions = np.asarray(positions, np.int64)
    pad = batch_size - positions.size
    take = np.concatenate([positions, np.zeros(pad, np.int64)])
    real = np.arange(batch_size) < positions.size
    choices = self.choice_concepts[take]
    out = GoalBatch(
        question_concepts=np.where(real[:, None],
                                   self.question_concepts[take], -1),
        choice_concepts=np.where(real[:, None, None], choices, -1),
        choice_valid=real[:, None] & (choices[..., 0] >= 0),
        query=np.where(real[:, None], self.query[take], 0.0),
        gold=np.where(real, self.gold[take], -1).astype(np.int32),
        example_mask=real,
        example_index=np.where(real, self.ids[take], -1).astype(np.int32))
    if rows is not None:
      out = GoalBatch(**{k: v[rows] for k, v in vars(out).items()})
    return out

  def batch_for_step(self, step: int, seed: int, batch_size: int,
                     rows: slice | None = None) -> GoalBatch:
    """The training batch of global step ``step``: epochs of shuffled
    batches, a function of ``(seed, step)`` only (so a resumed run sees the
    same batches)."""
    per_epoch = self.batches_per_epoch(batch_size)
    epoch, k = divmod(step, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(len(self))
    return self.batch(order[k * batch_size:(k + 1) * batch_size], batch_size,
                      rows)

  def ordered_batches(self, batch_size: int) -> Iterator[GoalBatch]:
    """Every question once, in dataset order (for evaluation)."""
    for k in range(self.batches_per_epoch(batch_size)):
      yield self.batch(np.arange(k * batch_size,
                                 min((k + 1) * batch_size, len(self))),
                       batch_size)


def goal_dataset(config, prep_dir, split: str, kg, answers, query, ids
                 ) -> GoalDataset:
  """The :class:`GoalDataset` of a prepared split."""
  grounded = read_grounded(Path(prep_dir) / f"{split}.grounded.jsonl", kg)
  w = config.walker
  return GoalDataset(grounded, answers, query, ids,
                     max_question_concepts=w.max_question_concepts,
                     max_choice_concepts=w.max_choice_concepts,
                     num_choices=config.batch.num_choices)
