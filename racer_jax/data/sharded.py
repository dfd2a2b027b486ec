"""A split divided into question shards, so that each process of a
multi-process run loads, pads and holds only its own questions.

The questions ``0 .. Q-1`` of a split form ``S`` contiguous shards. A global
batch of ``batch_size`` rows is ``S`` sub-batches of ``batch_size / S``
rows, one per shard and all of one shape bucket, in shard order. Process
``p`` of ``P`` holds shards ``p * S/P .. (p+1) * S/P - 1``, whose sub-batches
are exactly its rows of the global batch under ``P("data")``
(:func:`racer_jax.rl.parallel.process_rows`).

The batch plan (which bucket each step draws, which questions of each shard)
is a pure function of ``(seed, epoch)`` and of how many questions of each
shard fall in each bucket, which every process computes from the cached
subgraph sizes alone. So every process agrees on the plan without loading
the others' questions, and a one-process run with the same ``S`` (on any
number of devices) sees the same global batches: that is the reference a
multi-process run is checked against.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import jax
import numpy as np

from racer_jax.data.batch import GraphBatch, choose_bucket
from racer_jax.data.bucketed import BucketedDataset


def shard_bounds(num_questions: int, num_shards: int) -> np.ndarray:
  """int64 [S + 1]: shard ``s`` holds questions ``bounds[s] .. bounds[s+1]
  - 1`` (contiguous, sizes differing by at most one)."""
  return np.array([num_questions * s // num_shards
                   for s in range(num_shards + 1)], np.int64)


def local_shards(num_shards: int, process_index: int,
                 process_count: int) -> range:
  """The shards process ``process_index`` of ``process_count`` holds."""
  if num_shards % process_count:
    raise ValueError(f"{num_shards} question shards cannot be split evenly "
                     f"over {process_count} processes")
  per = num_shards // process_count
  return range(process_index * per, (process_index + 1) * per)


def bucket_of(num_nodes, num_edges, buckets) -> np.ndarray:
  """int [Q] the shape bucket of every question (from sizes alone)."""
  out = np.array([choose_bucket(int(n), int(e), buckets)
                  for n, e in zip(num_nodes, num_edges)], np.int64)
  bad = np.flatnonzero(out < 0)
  if bad.size:
    i = int(bad[0])
    raise ValueError(f"question {i}: subgraph ({num_nodes[i]} nodes, "
                     f"{num_edges[i]} edges) fits no bucket in {buckets}")
  return out


class ShardedDataset:
  """This process's shards of a split, with the global batch plan.

  Args:
    bucket_of_question: int [Q] every question's bucket (all shards); -1
      for a question left out (e.g. the validation slice).
    num_shards: S.
    shards: ``{s: BucketedDataset}`` of the shards held here, each built
      over questions ``shard_bounds(Q, S)[s] ..`` with their split indices
      as ``ids`` (see :func:`racer_jax.runs.workspace.load_workspace`).
  """

  def __init__(self, bucket_of_question: np.ndarray, num_shards: int,
               shards: dict[int, BucketedDataset]):
    self.num_shards = num_shards
    self.bounds = shard_bounds(len(bucket_of_question), num_shards)
    self.shards = dict(sorted(shards.items()))
    if not self.shards:
      raise ValueError("a ShardedDataset needs at least one local shard")
    first = next(iter(self.shards.values()))
    self.buckets = first.buckets
    # counts[s, b]: questions of shard s in bucket b (every shard).
    self.counts = np.zeros((num_shards, len(self.buckets)), np.int64)
    for s in range(num_shards):
      part = bucket_of_question[self.bounds[s]:self.bounds[s + 1]]
      self.counts[s] = np.bincount(part[part >= 0],
                                   minlength=len(self.buckets))
    for s, ds in self.shards.items():
      have = [len(ds.members.get(b, ())) for b in range(len(self.buckets))]
      if have != self.counts[s].tolist():
        raise ValueError(f"shard {s}: its dataset's bucket sizes {have} "
                         f"differ from the cached sizes "
                         f"{self.counts[s].tolist()}")
    self.num_questions = int(sum(ds.num_questions
                                 for ds in self.shards.values()))
    self._plan_key = None

  def _sub(self, batch_size: int) -> int:
    if batch_size % self.num_shards:
      raise ValueError(f"batch size {batch_size} is not divisible by "
                       f"{self.num_shards} question shards")
    return batch_size // self.num_shards

  def epoch_plan(self, seed: int, epoch: int, batch_size: int
                 ) -> list[tuple[int, list[np.ndarray]]]:
    """``(bucket, [positions within the bucket, per shard])`` of every
    batch of one epoch, in order (every question once)."""
    sub = self._sub(batch_size)
    rng = np.random.default_rng([seed, epoch])
    plan = []
    for b in range(len(self.buckets)):
      counts = self.counts[:, b]
      if not counts.any():
        continue
      orders = [rng.permutation(int(c)) for c in counts]
      steps = int(max(-(-c // sub) for c in counts))
      plan += [(b, [o[k * sub:(k + 1) * sub] for o in orders])
               for k in range(steps)]
    return [plan[i] for i in rng.permutation(len(plan))]

  def batches_per_epoch(self, batch_size: int) -> int:
    sub = self._sub(batch_size)
    return int(sum(max(-(-c // sub) for c in self.counts[:, b])
                   for b in range(len(self.buckets))
                   if self.counts[:, b].any()))

  def batch_for_step(self, step: int, seed: int, batch_size: int,
                     rows: slice | None = None) -> GraphBatch:
    """This process's rows of the global batch of step ``step``: its
    shards' sub-batches, concatenated in shard order. ``rows`` (from
    ``process_rows``) is checked against the shards held."""
    sub = self._sub(batch_size)
    held = list(self.shards)
    if rows is not None and (rows.start, rows.stop) != (held[0] * sub,
                                                        (held[-1] + 1) * sub):
      raise ValueError(f"rows {rows.start}:{rows.stop} of the global batch "
                       f"are not those of shards {held} ({sub} rows each)")
    per_epoch = self.batches_per_epoch(batch_size)
    epoch, k = divmod(step, per_epoch)
    key = (seed, epoch, batch_size)
    if self._plan_key != key:
      self._plan_key, self._plan = key, self.epoch_plan(seed, epoch,
                                                        batch_size)
    bucket, positions = self._plan[k]
    parts = [self.shards[s].batch(bucket, positions[s], sub) for s in held]
    return concatenate(parts)

  def ordered_batches(self, batch_size: int) -> Iterator[GraphBatch]:
    """The first local shard's questions once, in order (what a
    calibration pass reads; process 0 holds shard 0)."""
    return next(iter(self.shards.values())).ordered_batches(batch_size)


def concatenate(parts: Sequence[GraphBatch]) -> GraphBatch:
  """Row-wise concatenation of batches of one bucket."""
  if len(parts) == 1:
    return parts[0]
  return jax.tree.map(lambda *xs: np.concatenate(xs), *parts)
