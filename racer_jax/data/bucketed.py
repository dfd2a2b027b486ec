"""A dataset of questions pre-padded once into their shape buckets.

Padding with jraph costs about a millisecond per question, so it is done
once; a batch is then an index gather on stacked arrays. Batch order is a
pure function of ``(seed, epoch)``, so training step ``s`` always sees the
same batch: that is what makes resuming from a checkpoint exact.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import jax
import numpy as np

from racer_jax.data.batch import GraphBatch, choose_bucket, empty_subgraph, pad_subgraph
from racer_jax.kg.subgraph import Subgraph


class BucketedDataset:
  """Questions grouped by shape bucket, padded and stacked per bucket.

  Args:
    subgraphs: one per question.
    gold: gold choice per question (None when unlabeled).
    query: float32 [Q, dq] question embeddings.
    buckets: ``(N, E)`` budgets; every subgraph must fit one.
    ids: int [Q] what a batch's ``example_index`` reports for each question
      (default ``0 .. Q-1``; a shard of a split passes the split's indices).
  """

  def __init__(self, subgraphs: Sequence[Subgraph],
               gold: Sequence[int | None], query: np.ndarray, *,
               buckets: Sequence[tuple[int, int]], num_choices: int,
               max_degree: int, ids: Sequence[int] | None = None):
    self.buckets = [tuple(b) for b in buckets]
    self.num_questions = len(subgraphs)
    self.ids = (np.arange(self.num_questions) if ids is None else
                np.asarray(ids, np.int64))
    self._pad_args = (num_choices, max_degree)
    self.gold = np.array([-1 if g is None else g for g in gold], np.int32)
    self.query = np.asarray(query, np.float32)
    if self.query.shape[0] != self.num_questions:
      raise ValueError(f"{self.query.shape[0]} query rows for "
                       f"{self.num_questions} questions")
    members: dict[int, list[int]] = {}
    for i, s in enumerate(subgraphs):
      b = choose_bucket(s.num_nodes, s.num_edges, self.buckets)
      if b < 0:
        raise ValueError(f"question {i}: subgraph ({s.num_nodes} nodes, "
                         f"{s.num_edges} edges) fits no bucket in "
                         f"{self.buckets}")
      members.setdefault(b, []).append(i)
    self.members = {b: np.array(ix, np.int64) for b, ix in
                    sorted(members.items())}
    self._stacks = {}
    for b, ix in self.members.items():
      n, e = self.buckets[b]
      rows = [pad_subgraph(subgraphs[i], n, e, num_choices, max_degree)
              for i in ix]
      rows.append(pad_subgraph(empty_subgraph(max_degree), n, e, num_choices,
                               max_degree))  # the filler row, last
      self._stacks[b] = jax.tree.map(lambda *xs: np.stack(xs), *rows)

  def _stack(self, bucket: int):
    """The bucket's stacked rows (the filler row last; only the filler
    for a bucket without questions here, e.g. in one shard of a split)."""
    if bucket not in self._stacks:
      n, e = self.buckets[bucket]
      filler = pad_subgraph(empty_subgraph(self._pad_args[1]), n, e,
                            *self._pad_args)
      self._stacks[bucket] = jax.tree.map(lambda x: x[None], filler)
    return self._stacks[bucket]

  def batch(self, bucket: int, positions: np.ndarray, batch_size: int,
            rows: slice | None = None) -> GraphBatch:
    """The questions ``members[bucket][positions]``, filled to batch_size
    (no positions: filler only); with ``rows``, only those rows of it (a
    process's share of a global batch: nothing else is padded or copied)."""
    positions = np.asarray(positions, np.int64)
    if positions.size > batch_size:
      raise ValueError(f"{positions.size} positions for a batch of "
                       f"{batch_size}")
    take = rows
    members = self.members.get(bucket, np.zeros(0, np.int64))
    filler = len(members)
    rows = np.full(batch_size, filler, np.int64)
    rows[:positions.size] = positions
    real = np.arange(batch_size) < positions.size
    local = np.where(real, members[np.minimum(rows, filler - 1)]
                     if filler else 0, 0)        # rows of this dataset
    index = np.where(real, self.ids[local] if filler else -1,
                     -1).astype(np.int32)         # what the batch reports
    if take is not None:
      rows, real, index, local = rows[take], real[take], index[take], \
          local[take]
    stacked = jax.tree.map(lambda x: x[rows], self._stack(bucket))
    if self.num_questions:
      query = np.where(real[:, None], self.query[local], 0.0)
      gold = np.where(real, self.gold[local], -1)
    else:  # an empty shard: filler rows only
      query = np.zeros((real.size, self.query.shape[1]), np.float32)
      gold = np.full(real.size, -1)
    return GraphBatch(gold=gold.astype(np.int32), example_mask=real,
                      example_index=index, query=query.astype(np.float32),
                      **stacked)

  def epoch_plan(self, seed: int, epoch: int, batch_size: int,
                 shuffle: bool = True) -> list[tuple[int, np.ndarray]]:
    """``(bucket, positions)`` of every batch of one epoch, in order."""
    rng = np.random.default_rng([seed, epoch])
    plan = []
    for b, ix in self.members.items():
      order = rng.permutation(len(ix)) if shuffle else np.arange(len(ix))
      plan += [(b, order[i:i + batch_size])
               for i in range(0, len(ix), batch_size)]
    if shuffle:
      plan = [plan[i] for i in rng.permutation(len(plan))]
    return plan

  def batches_per_epoch(self, batch_size: int) -> int:
    return sum(-(-len(ix) // batch_size) for ix in self.members.values())

  def batch_for_step(self, step: int, seed: int, batch_size: int,
                     rows: slice | None = None) -> GraphBatch:
    """The training batch of global step ``step`` (epochs of shuffled
    batches, deterministic in ``seed``)."""
    per_epoch = self.batches_per_epoch(batch_size)
    epoch, k = divmod(step, per_epoch)
    key = (seed, epoch, batch_size)
    if getattr(self, "_plan_key", None) != key:
      self._plan_key, self._plan = key, self.epoch_plan(seed, epoch,
                                                        batch_size)
    bucket, positions = self._plan[k]
    return self.batch(bucket, positions, batch_size, rows)

  def ordered_batches(self, batch_size: int) -> Iterator[GraphBatch]:
    """Every question once, bucket by bucket (for evaluation)."""
    for bucket, positions in self.epoch_plan(0, 0, batch_size, shuffle=False):
      yield self.batch(bucket, positions, batch_size)
