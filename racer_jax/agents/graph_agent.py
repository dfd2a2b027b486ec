"""GraphAgent: the jitted retrieval, read back as triples per choice.

For a batch of questions the frozen walker generates candidate paths toward
every choice (multi-path generation, shared-memory reranking), the refiner
scores them (one device program, :func:`racer_jax.refiner.update.
make_retriever`), and the host keeps each choice's best
``paths_per_choice`` paths by refiner score, as :class:`RetrievedPath` s of
:class:`~racer_jax.agents.templates.Triple` s, each checked to exist in the
KG. The agent owns the shared memory for the collaboration loop: rejected
paths add rejection counts, answered questions success/failure counts.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from racer_jax.knowledge.path_text import RetrievedPath, Triple
from racer_jax.memory import edge_memory
from racer_jax.refiner import update as refiner_update
from racer_jax.runs import run_config
from racer_jax.walker import run as walker_run
from racer_jax.runs.checkpoints import restore_run, restore_template
from racer_jax.refiner.state import (
  create_state,
  load_walker,
  refiner_config,
  walker_graph,
)


def read_paths(kg, out: dict, row: int, num_choices: int,
               keep: int) -> list[list[RetrievedPath]]:
  """One question's best ``keep`` paths per choice (host side).

  ``out``: the retriever's output, on the host (global concept and edge
  ids); ``row``: the batch row. Zero-hop paths carry no evidence and are
  skipped.
  """
  valid, score = out["valid"][row], out["score"][row]
  per_choice: list[list[RetrievedPath]] = [[] for _ in range(num_choices)]
  for p in np.argsort(-score, kind="stable"):
    c = int(out["choice"][row, p])
    if not valid[p] or c >= num_choices or len(per_choice[c]) >= keep:
      continue
    triples, ok = [], True
    for h in np.flatnonzero(out["edges"][row, p] >= 0):
      head = int(out["nodes"][row, p, h])
      tail = int(out["nodes"][row, p, h + 1])
      rel = int(out["relations"][row, p, h])
      ok &= kg.has_edge(head, rel, tail)
      triples.append(Triple(kg.concepts[head], kg.relations[rel],
                            kg.concepts[tail],
                            int(out["edges"][row, p, h])))
    if triples:
      per_choice[c].append(RetrievedPath(triples, float(score[p]),
                                         bool(out["reached"][row, p]),
                                         bool(ok)))
  return per_choice


# the evidence of a choice nothing walked toward
NO_EVIDENCE = {"walks": 0, "reached": 0, "distinct": 0, "best_log_prob": None,
               "best_score": None}


def choice_evidence(out: dict, row: int, num_choices: int) -> list[dict]:
  """One question's walker evidence per choice (host side), from the
  retriever's output ``out`` ([B, P] arrays, P = C · paths_per_choice):

  ``walks`` sampled toward the choice, ``reached`` (how many of them reached
  it, duplicates included: the reach frequency), ``distinct`` (distinct
  real paths among them), ``best_log_prob`` (the best reaching walk's path
  log-probability; None if none reached), ``best_score`` (the refiner's
  best score over its distinct paths; None without one) and, from a
  refiner with a choice head, ``choice_prob`` (its probability that the
  paths support this choice, softmax over the question's choices)."""
  choice = np.asarray(out["choice"][row])
  reached = np.asarray(out["reached"][row], bool)
  valid = np.asarray(out["valid"][row], bool)
  log_prob = np.asarray(out["log_prob"][row], np.float64)
  score = np.asarray(out["score"][row], np.float64)
  prob = None
  if "choice_logits" in out:
    logits = np.asarray(out["choice_logits"][row, :num_choices], np.float64)
    z = np.exp(logits - logits.max())
    prob = z / z.sum()
  evidence = []
  for c in range(num_choices):
    mine = choice == c
    hit = mine & reached & np.isfinite(log_prob)
    scored = mine & valid & np.isfinite(score)
    evidence.append({
        "walks": int(mine.sum()), "reached": int((mine & reached).sum()),
        "distinct": int((mine & valid).sum()),
        "best_log_prob": float(log_prob[hit].max()) if hit.any() else None,
        "best_score": float(score[scored].max()) if scored.any() else None})
    if prob is not None:
      evidence[-1]["choice_prob"] = float(prob[c])
  return evidence


_RETRIEVERS: dict = {}


def _retriever(refiner, walker, walker_cfg, cfg):
  """One jitted retriever per (architecture, settings) in the process:
  GraphAgents of the same runs (an evaluation's calibration, passes and
  ablations, several evaluations in one process) share its compilations;
  the parameters are arguments, so sharing is exact."""
  key = (repr(refiner), repr(walker), walker_cfg, cfg)
  if key not in _RETRIEVERS:
    _RETRIEVERS[key] = refiner_update.make_retriever(refiner, walker, walker_cfg,
                                               cfg)
  return _RETRIEVERS[key]


class GraphAgent:
  """Retrieval from a refiner run (``refiner_workdir``) and its walker."""

  def __init__(self, refiner_workdir, ws, *, paths_per_choice: int = 2,
               use_memory: bool | None = None, rank_by: str = "refiner",
               rollout_overrides: dict | None = None,
               refiner_overrides: dict | None = None,
               log: Callable[[str], None] = print):
    """``rank_by``: ``refiner`` (its scores) or ``logprob`` (the walker's
    path log-probability: the no-refiner ablation); ``use_memory``: None
    follows the walker run. ``rollout_overrides`` replace fields of the
    walker's :class:`RolloutConfig` (``{"prune": False}``: the pruning
    ablation at inference) and ``refiner_overrides`` fields of the
    :class:`RefinerConfig` (``{"paths_per_choice": 1, "sample_hops": 0}``:
    one greedy path per choice, the single-path ablation)."""
    if rank_by not in ("refiner", "logprob"):
      raise ValueError(f"rank_by={rank_by!r}: expected refiner or logprob")
    self.rank_by = rank_by
    refiner_workdir = Path(refiner_workdir)
    rconfig = run_config.load(refiner_workdir, "refiner run")
    self.ws = ws
    self.keep = paths_per_choice
    wconfig, walker, wstate, self.walker_step, quality = load_walker(
        rconfig.refiner.walker_workdir, ws, log)
    refiner, _, template = restore_template(create_state, rconfig,
                                            ws.concept_emb.shape[1],
                                            wconfig.walker.max_steps)
    state, _, self.refiner_step = restore_run(refiner_workdir, template,
                                              "refiner", log=log)
    self.refiner = refiner   # λ: the one chosen on the validation slice
    self._params = state.params
    self._walker_params = wstate.params
    self._walker_cfg = walker_run.walker_train_config(wconfig)
    if rollout_overrides:
      self._walker_cfg = dataclasses.replace(
          self._walker_cfg, rollout=dataclasses.replace(
              self._walker_cfg.rollout, **rollout_overrides))
    self._cfg = refiner_config(rconfig, wconfig)
    self._whole = walker_graph(wconfig, ws, log)
    if refiner_overrides:
      self._cfg = dataclasses.replace(self._cfg, **refiner_overrides)
    self._make = lambda cfg: _retriever(refiner, walker, self._walker_cfg,
                                        cfg)
    self.use_memory = (quality is not None if use_memory is None
                       else use_memory)
    self.memory = (wstate.memory if self.use_memory and
                   wstate.memory.num_edges == ws.kg.num_edges
                   else edge_memory.empty(ws.kg.num_edges))
    self._gamma, self._prior = wconfig.memory.gamma, wconfig.memory.prior
    self.temperature = self._cfg.temperature
    self._initial_memory = self.memory
    # what filled the memory a pass starts from (see start_from)
    self.memory_source = "walker_training" if self.use_memory else "none"
    self._reused = None   # see reusing_retrievals
    self.device_retrievals = 0   # walks run on the device (tests count)

  @contextlib.contextmanager
  def reusing_retrievals(self):
    """Within it, a batch retrieved again with the same rng, temperature
    and memory reuses the first walk's device output, its paths read for
    the current ``keep``: passes that differ only in the paths shown per
    choice (k' chosen on validation) walk once. The device output does not
    depend on ``keep`` (read_paths takes a prefix of the same ranking)."""
    self._reused = {}
    try:
      yield self
    finally:
      self._reused = None

  def reset_memory(self):
    """Back to the memory a pass starts from: the walker run's, or the one
    given to :meth:`start_from` (between evaluations)."""
    self.memory = self._initial_memory

  def start_from(self, memory: edge_memory.EdgeMemory, source: str):
    """Every later pass starts from ``memory`` (e.g. the answer run's
    memory pass over the training split, ``source="train_split_loop"``)."""
    if not self.use_memory:
      raise ValueError("this GraphAgent has no shared memory to start from")
    if memory.num_edges != self.ws.kg.num_edges:
      raise ValueError(f"a memory of {memory.num_edges} edges for a graph "
                       f"of {self.ws.kg.num_edges}")
    self._initial_memory = self.memory = memory
    self.memory_source = source

  def edge_quality(self) -> np.ndarray:
    """float32 [E] the shared memory's quality of every edge (0: unseen or
    no memory)."""
    return np.asarray(self._quality())

  def _quality(self):
    if not self.use_memory:
      return np.zeros(self.ws.kg.num_edges, np.float32)
    return edge_memory.quality(self.memory, gamma=self._gamma,
                               prior=self._prior)

  def retrieve(self, batch, rng, temperature: float | None = None,
               examples=None):
    """``(raw device output on the host, per row: per choice paths)``;
    rows of padding questions get ``None``. (``examples`` is for agents
    that read the question text; the walker does not.)"""
    del examples
    t = self.temperature if temperature is None else float(temperature)
    key = out = None
    if self._reused is not None:
      key = (np.asarray(batch.example_index).tobytes(),
             np.asarray(batch.example_mask).tobytes(),
             np.asarray(jax.random.key_data(rng) if jax.dtypes.issubdtype(
                 rng.dtype, jax.dtypes.prng_key) else rng).tobytes(), t)
      memory, out = self._reused.get(key, (None, None))
      if memory is not self.memory:
        out = None
    if out is None:
      out = jax.device_get(self._make(dataclasses.replace(
          self._cfg, temperature=t))(
          self._params, batch, self._walker_params, self.ws.concept_emb,
          self.ws.relation_emb, self._quality(), rng, self._whole))
      self.device_retrievals += 1
      if key is not None:
        self._reused[key] = (self.memory, out)
    if self.rank_by == "logprob":
      out = dict(out, score=np.where(out["valid"], out["log_prob"], -np.inf))
    c = batch.choice_valid.shape[1]
    rows = [read_paths(self.ws.kg, out, b, c, self.keep)
            if batch.example_mask[b] else None
            for b in range(batch.example_mask.shape[0])]
    return out, rows

  def record(self, paths: list[RetrievedPath], outcome: int) -> int:
    """Adds ``paths`` to the memory with one outcome (SUCCESS, FAILURE or
    REJECTION of :mod:`racer_jax.memory.edge_memory`); returns the number
    of edge counts added (0 without a memory)."""
    if not self.use_memory or not paths:
      return 0
    width = max(len(p.triples) for p in paths)
    ids = np.full((len(paths), width), -1, np.int32)
    for i, p in enumerate(paths):
      ids[i, :len(p.triples)] = p.edge_ids
    self.memory = edge_memory.update(
        self.memory, ids, np.full(len(paths), outcome, np.int32))
    return int((ids >= 0).sum())
