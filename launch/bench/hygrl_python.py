"""Plain-Python/NumPy reference of HyGRL's greedy beam search, one question.

A second opinion on :func:`racer_jax.hygrl.search.search` with
``sample=False`` (tests compare the retrieved sequences node for node) and
the "Python loop" baseline of the ``hygrl`` speed benchmark. Nothing uses
JAX and nothing is vectorized over questions: the graph is neighbor sets
built edge by edge, personalized PageRank is a power iteration over the
edge list, Adamic-Adar and Jaccard are computed pair by pair when a
candidate needs them, and each step loops over the frontier candidates.
NumPy does the vector math (PPR's edge sums, cosines, the policy MLP as
matrix products over the frontier).

The scores are computed in float64 and rounded to float32; candidates are
ranked, as :func:`racer_jax.hygrl.beam.beam_search` does, by their float32
logit (the policy's own logit; for the heuristic ``log S - log1p(-S)``)
with ties going to the lower node index (``jax.lax.top_k``), and kept when
σ(logit) >= tau in float32. Candidates whose logits agree to ~1e-6
(relative), or whose P is that close to tau, may still be ordered or
thresholded differently from the float32 JAX program; exact agreement
assumes inputs without such near-ties.

Typical use: ``q = question_from_batch(batch, row, concept_emb)``, then
``greedy_search(q, cfg, params=params)`` (the learned policy, a flax params
pytree after ``jax.device_get``) or ``greedy_search(q, cfg, theta=theta)``
(HyGRL-Heuristic, the fused score).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

F32 = np.float32


@dataclasses.dataclass
class Question:
  """One question's arrays, as one row of a ``GraphBatch`` gives them.

  Attributes:
    senders, receivers: int [E] local node ids; edge_mask: bool [E].
    node_mask, seeds, gold, choice: bool [N] (real node, question concept,
      gold answer concept, grounds some answer choice).
    node_emb: float32 [N, d] (zero rows on padding); query: float32 [d].
  """
  senders: np.ndarray
  receivers: np.ndarray
  edge_mask: np.ndarray
  node_mask: np.ndarray
  seeds: np.ndarray
  gold: np.ndarray
  choice: np.ndarray
  node_emb: np.ndarray
  query: np.ndarray


@dataclasses.dataclass
class Prepared:
  """The per-question heuristics the search needs.

  Attributes:
    neighbors: ``neighbors[u]`` the set of ``v ~ u`` in the simple undirected
      graph of the unmasked edges (as ``heuristics.dense_adjacency``).
    real_neighbors: the same restricted to real nodes (Adamic-Adar and
      Jaccard look only at real nodes).
    ppr: float64 [N] personalized PageRank from the question concepts.
  """
  neighbors: list
  real_neighbors: list
  ppr: np.ndarray


def question_from_batch(batch, row: int, concept_emb) -> Question:
  """Row ``row`` of a (NumPy) ``GraphBatch``, as ``hygrl.hygrl_inputs``
  reads it."""
  g = batch.graphs
  node_mask = np.asarray(batch.node_mask[row], bool)
  concept = np.asarray(g.nodes["concept"][row])
  node_emb = np.where(node_mask[:, None],
                      np.asarray(concept_emb)[np.maximum(concept, 0)], 0.0)
  gold_index = int(batch.gold[row])
  choice_mask = np.asarray(batch.choice_mask[row], bool)     # [N, C]
  gold = choice_mask[:, max(gold_index, 0)] & node_mask & (gold_index >= 0)
  valid = np.asarray(batch.choice_valid[row], bool)
  return Question(
      senders=np.asarray(g.senders[row]), receivers=np.asarray(
          g.receivers[row]), edge_mask=np.asarray(batch.edge_mask[row], bool),
      node_mask=node_mask,
      seeds=np.asarray(g.nodes["is_question"][row], bool) & node_mask,
      gold=gold, choice=(choice_mask & valid[None, :]).any(1) & node_mask,
      node_emb=node_emb.astype(F32),
      query=np.asarray(batch.query[row], F32))


# -- heuristics ---------------------------------------------------------------
def neighbor_sets(q: Question) -> list:
  """Simple undirected adjacency: parallel edges collapse, no self-loops,
  masked edges dropped (padding nodes are not filtered, as in JAX)."""
  n = q.node_mask.shape[0]
  neighbors = [set() for _ in range(n)]
  for s, r, ok in zip(q.senders, q.receivers, q.edge_mask):
    if ok and s != r:
      neighbors[int(s)].add(int(r))
      neighbors[int(r)].add(int(s))
  return neighbors


def personalized_pagerank(q: Question, restart_prob: float,
                          num_iters: int) -> np.ndarray:
  """Multi-source PPR by power iteration over the directed multi-edge list
  (float64; see ``heuristics.personalized_pagerank``)."""
  n, mask = q.node_mask.shape[0], q.node_mask
  edges = [(int(s), int(r)) for s, r, ok in
           zip(q.senders, q.receivers, q.edge_mask)
           if ok and mask[s] and mask[r]]
  out_deg = np.zeros(n)
  for s, _ in edges:
    out_deg[s] += 1.0
  restart = np.where(mask & q.seeds, 1.0, 0.0)
  if restart.sum() == 0:
    return np.zeros(n)
  restart /= restart.sum()
  senders = np.array([s for s, _ in edges], np.int64)
  receivers = np.array([r for _, r in edges], np.int64)
  dangling = mask & (out_deg == 0)
  p = restart.copy()
  for _ in range(num_iters):
    flow = np.zeros(n)
    np.add.at(flow, receivers, p[senders] / out_deg[senders])
    lost = p[dangling].sum()
    p = restart_prob * restart + (1.0 - restart_prob) * (flow + lost * restart)
  return p


def adamic_adar(real_neighbors, u: int, v: int) -> float:
  """``sum_{w in N(u) ∩ N(v)} 1 / log(deg w)`` (0 on the diagonal)."""
  if u == v:
    return 0.0
  return sum(1.0 / math.log(len(real_neighbors[w]))
             for w in real_neighbors[u] & real_neighbors[v])


def jaccard(real_neighbors, u: int, v: int) -> float:
  """``|N(u) ∩ N(v)| / |N(u) ∪ N(v)|`` (0 on the diagonal or no union)."""
  if u == v:
    return 0.0
  union = len(real_neighbors[u] | real_neighbors[v])
  common = len(real_neighbors[u] & real_neighbors[v])
  return common / union if union else 0.0


def prepare(q: Question, restart_prob: float = 0.15,
            ppr_iters: int = 80) -> Prepared:
  """The heuristics of one question (computed once, used every step)."""
  neighbors = neighbor_sets(q)
  real = [{v for v in nb if q.node_mask[v]} if q.node_mask[u] else set()
          for u, nb in enumerate(neighbors)]
  return Prepared(neighbors, real,
                  personalized_pagerank(q, restart_prob, ppr_iters))


def _unit(x):
  norm = np.linalg.norm(x)
  return x / norm if norm > 0 else np.zeros_like(x)


def candidate_metrics(q: Question, prep: Prepared, sequence, frontier,
                      with_choice: bool = False):
  """float64 [F, 4] for the frontier nodes (in ``frontier`` order):
  normalized PPR, path-aware Adamic-Adar and Jaccard (best link from an
  adjacent sequence node), cosine to unit(query + mean sequence emb); with
  ``with_choice`` a fifth column, 1 where the node grounds a choice."""
  emb = q.node_emb.astype(np.float64)
  mean = emb[sequence].mean(0) if sequence else np.zeros(emb.shape[1])
  context = _unit(q.query.astype(np.float64) + mean)
  raw = np.zeros((len(frontier), 5 if with_choice else 4))
  for i, v in enumerate(frontier):
    links = [u for u in sequence if v in prep.neighbors[u]]
    raw[i, 0] = prep.ppr[v]
    raw[i, 1] = max(adamic_adar(prep.real_neighbors, u, v) for u in links)
    raw[i, 2] = max(jaccard(prep.real_neighbors, u, v) for u in links)
    raw[i, 3] = float(_unit(emb[v]) @ context)
    if with_choice:
      raw[i, 4] = float(q.choice[v])
  raw = np.maximum(raw, 0.0)
  top = raw.max(0)
  return np.where(top > 0, raw / np.where(top > 0, top, 1.0), 0.0)


# -- scorers ------------------------------------------------------------------
def heuristic_prob(theta, metrics):
  """The fused score ``S = sum_k softmax(theta)_k m_k``, float32, clipped to
  ``[1e-6, 1 - 1e-6]`` (HyGRL-Heuristic's P)."""
  theta = np.asarray(theta, np.float64)
  weights = np.exp(theta - theta.max())
  weights /= weights.sum()
  s = (metrics @ weights).astype(F32)
  return np.clip(s, F32(1e-6), F32(1.0 - 1e-6))


def float64_params(params) -> dict:
  """The policy's layers as float64 NumPy: ``{layer: {kernel, bias}}``."""
  return {k: {n: np.asarray(a, np.float64) for n, a in layer.items()}
          for k, layer in params["params"].items()}


def policy_logits(p, window_features, candidate_features):
  """``HyGRLPolicy`` forward: logits [F] from window features [Lw, d] and
  candidate features [F, d + 5]; ``p`` from :func:`float64_params`."""
  s = window_features.reshape(-1) @ p["state"]["kernel"] + p["state"]["bias"]
  h = np.maximum(candidate_features @ p["candidate"]["kernel"] + s, 0.0)
  i = 0
  while f"hidden_{i}" in p:
    layer = p[f"hidden_{i}"]
    h = np.maximum(h @ layer["kernel"] + layer["bias"], 0.0)
    i += 1
  return (h @ p["out"]["kernel"] + p["out"]["bias"])[:, 0]


def policy_scores(p, q: Question, window, frontier, metrics,
                  choice_feature: bool = True):
  """``(σ(logit), logit)`` in float32 for the frontier candidates; ``p``
  from :func:`float64_params`; ``metrics`` the four of
  :func:`candidate_metrics`."""
  d = q.node_emb.shape[1]
  window_features = np.zeros((len(window), d))
  for i, u in enumerate(window):
    if u >= 0:
      window_features[i] = q.node_emb[u]
  parts = [q.node_emb[frontier].astype(np.float64), metrics]
  if choice_feature:
    parts.append(q.choice[frontier, None].astype(np.float64))
  features = np.concatenate(parts, axis=1)
  logits = policy_logits(p, window_features, features).astype(F32)
  with np.errstate(over="ignore"):
    return (F32(1.0) / (F32(1.0) + np.exp(-logits))).astype(F32), logits


def _rank_key(prob):
  """The heuristic scorer's float32 logit ``log S - log1p(-S)``."""
  return (np.log(prob) - np.log1p(-prob)).astype(F32)


# -- search -------------------------------------------------------------------
def sufficient(q: Question, neighbors, sequence, max_iters: int) -> bool:
  """A gold concept reachable from a question concept inside the subgraph
  induced by ``sequence``, within ``max_iters`` hops (``beam.sufficient``)."""
  selected = set(sequence)
  reach = {u for u in selected if q.seeds[u]}
  for _ in range(max_iters):
    grown = reach | {v for u in reach for v in neighbors[u] if v in selected}
    if grown == reach:
      break
    reach = grown
  return any(q.gold[u] for u in reach)


def greedy_search(q: Question, cfg, *, params=None, theta=None,
                  prep: Prepared | None = None):
  """HyGRL's greedy beam search for one question.

  Args:
    q: the question; cfg: a ``hygrl.HyGRLConfig``.
    params: the ``HyGRLPolicy`` params (NumPy or JAX arrays, or already
      converted by :func:`float64_params`, to convert once for many
      questions); else
    theta: float [M] fusion weights (the heuristic scorer, with
      ``cfg.heuristic_tau`` as tau; M = 5 with ``cfg.heuristic_choice``).
    prep: :func:`prepare`'s output, computed here if None.

  Returns:
    ``(sequence, sufficient)``: the node ids in sequence order (question
    concepts first, by index, then the appended ones as appended) and
    whether the induced subgraph links a question and a gold concept.
  """
  if (params is None) == (theta is None):
    raise ValueError("give exactly one of params and theta")
  b = cfg.beam
  tau = F32(b.tau if params is not None else cfg.heuristic_tau)
  if prep is None:
    prep = prepare(q, cfg.restart_prob, cfg.ppr_iters)
  p = params
  if params is not None and "params" in params:
    p = float64_params(params)
  sequence = [int(v) for v in np.flatnonzero(q.seeds & q.node_mask)]
  visited, added, active = set(sequence), 0, bool(sequence)
  for _ in range(b.max_depth):
    if not active:
      break
    window = (sequence[::-1] + [-1] * b.window)[:b.window]
    frontier = sorted({v for u in sequence for v in prep.neighbors[u]
                       if v not in visited and q.node_mask[v]})
    chosen = []
    if frontier:
      if params is not None:
        metrics = candidate_metrics(q, prep, sequence, frontier)
        prob, key = policy_scores(p, q, window, frontier, metrics,
                                  cfg.policy_choice)
      else:
        metrics = candidate_metrics(q, prep, sequence, frontier,
                                    cfg.heuristic_choice)
        prob = heuristic_prob(theta, metrics)
        key = _rank_key(prob)
      passing = [i for i in range(len(frontier)) if prob[i] >= tau]
      ranked = sorted(passing, key=lambda i: (-key[i], frontier[i]))
      room = min(b.beam_width, b.max_nodes - added)
      chosen = [frontier[i] for i in ranked[:room]]
    sequence += chosen
    visited.update(chosen)
    added += len(chosen)
    active = bool(chosen) and added < b.max_nodes
  return sequence, sufficient(q, prep.neighbors, sequence, b.max_nodes + 1)
