"""Graph heuristics of HyGRL (hybrid graph retrieval) for candidate scoring.

Structural scores (personalized PageRank, Adamic-Adar, Jaccard and a
path-aware expansion of the pairwise ones), semantic scores (cosine to the
"question ⊕ current sequence" context), per-question normalization and a
softmax-weighted fusion whose weights are calibrated on a small labeled set.

Written for ONE padded question graph (``senders``/``receivers`` int32 [E]
local node ids, bool ``edge_mask`` [E], bool ``node_mask`` [N]); callers
``vmap`` over questions. Shapes are fixed, so everything is jittable.
Matmuls run at ``Precision.HIGHEST`` (exact float32 on GPU/TPU too).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax

_HIGHEST = jax.lax.Precision.HIGHEST
_SOFTPLUS_INV_1 = 0.5413248546129181  # log(e - 1): softplus(.) == 1


def _safe_unit(x, axis=-1):
  """``x / ||x||`` along ``axis``; zero vectors stay zero."""
  norm = jnp.linalg.norm(x, axis=axis, keepdims=True)
  return jnp.where(norm > 0, x / jnp.where(norm > 0, norm, 1.0), 0.0)


def dense_adjacency(senders, receivers, edge_mask, num_nodes: int):
  """Simple undirected adjacency of the unmasked edges.

  ``u ~ v`` iff some unmasked edge ``u -> v`` or ``v -> u`` exists; relation
  labels and parallel edges collapse, self-loops are dropped.

  Args:
    senders, receivers: int32 [E]; edge_mask: bool [E].
    num_nodes: N (static).

  Returns:
    bool [N, N], symmetric, False on the diagonal.
  """
  count = jnp.zeros((num_nodes, num_nodes), jnp.int32).at[
      senders, receivers].add(edge_mask.astype(jnp.int32))
  adj = (count > 0) | (count.T > 0)
  return adj & ~jnp.eye(num_nodes, dtype=bool)


def personalized_pagerank(senders, receivers, edge_mask, node_mask, restart,
                          *, restart_prob: float = 0.15,
                          num_iters: int = 80):
  """Multi-source personalized PageRank by power iteration.

  ``p <- restart_prob * r + (1 - restart_prob) * (P^T p + dangling(p) * r)``
  with ``r = restart / sum(restart)`` and ``P`` the row-stochastic transition
  over out-edges, parallel edges counted with multiplicity (a MultiDiGraph).
  Dangling nodes (no out-edge) send their mass to ``r``: networkx's
  ``pagerank(G, alpha=1 - restart_prob, personalization=r)`` with
  ``dangling=None``. Starts from ``p = r``; the error contracts by
  ``1 - restart_prob`` per iteration (its L1 norm is at most
  ``2 (1 - restart_prob)^num_iters``). At 0.15, on random graphs of <= 24
  nodes, the worst entry is ~5e-3 off networkx after 30 iterations, ~2e-4
  after 50 and < 1e-5 after 70 (the float32 floor, ~1e-6, by ~80).

  Args:
    senders, receivers: int32 [E]; edge_mask: bool [E]; node_mask: bool [N].
    restart: bool or float [N] restart weights (e.g. the question concepts);
      entries on masked nodes are ignored.
    restart_prob: teleport probability (networkx's ``1 - alpha``).
    num_iters: power iterations (static).

  Returns:
    float32 [N] summing to 1 over real nodes; 0 on masked nodes, and all
    zeros when the restart set is empty.
  """
  n = node_mask.shape[0]
  edge_ok = edge_mask & node_mask[senders] & node_mask[receivers]
  w = edge_ok.astype(jnp.float32)
  r = jnp.where(node_mask, restart.astype(jnp.float32), 0.0)
  total = jnp.sum(r)
  r = jnp.where(total > 0, r / jnp.where(total > 0, total, 1.0), 0.0)
  out_deg = jax.ops.segment_sum(w, senders, num_segments=n)
  dangling = node_mask & (out_deg == 0)
  inv_deg = jnp.where(out_deg > 0, 1.0 / jnp.maximum(out_deg, 1.0), 0.0)

  def step(_, p):
    flow = jax.ops.segment_sum(w * (p * inv_deg)[senders], receivers,
                               num_segments=n)
    lost = jnp.sum(jnp.where(dangling, p, 0.0))
    return restart_prob * r + (1.0 - restart_prob) * (flow + lost * r)

  return jax.lax.fori_loop(0, num_iters, step, r)


def _pair_mask(adj, node_mask):
  """float32 [N, N] adjacency restricted to real nodes, and the bool mask
  of real off-diagonal pairs."""
  n = node_mask.shape[0]
  real = node_mask[:, None] & node_mask[None, :]
  pairs = real & ~jnp.eye(n, dtype=bool)
  return jnp.where(real, adj, False).astype(jnp.float32), pairs


def adamic_adar(adj, node_mask):
  """Adamic-Adar index ``sum_{w in N(u) ∩ N(v)} 1 / log(deg(w))``.

  As ``networkx.adamic_adar_index`` on the simple undirected graph ``adj``
  (a common neighbor has degree >= 2, so the log is positive).

  Args:
    adj: bool [N, N] from :func:`dense_adjacency`; node_mask: bool [N].

  Returns:
    float32 [N, N], symmetric; 0 on the diagonal (defined so, not the
    self-score) and on pairs with a masked node.
  """
  a, pairs = _pair_mask(adj, node_mask)
  deg = jnp.sum(a, axis=1)
  inv_log = jnp.where(deg > 1, 1.0 / jnp.log(jnp.maximum(deg, 2.0)), 0.0)
  score = jnp.matmul(a * inv_log[None, :], a.T, precision=_HIGHEST)
  return jnp.where(pairs, score, 0.0)


def jaccard(adj, node_mask):
  """Jaccard coefficient ``|N(u) ∩ N(v)| / |N(u) ∪ N(v)|``.

  As ``networkx.jaccard_coefficient`` on the simple undirected graph ``adj``
  (``N(u)`` contains ``v`` when ``u ~ v``); 0 where the union is empty.

  Args:
    adj: bool [N, N] from :func:`dense_adjacency`; node_mask: bool [N].

  Returns:
    float32 [N, N] in [0, 1], symmetric; 0 on the diagonal (defined so,
    networkx would give 1 for a non-isolated node) and on masked pairs.
  """
  a, pairs = _pair_mask(adj, node_mask)
  deg = jnp.sum(a, axis=1)
  common = jnp.matmul(a, a.T, precision=_HIGHEST)
  union = deg[:, None] + deg[None, :] - common
  score = jnp.where(union > 0, common / jnp.where(union > 0, union, 1.0), 0.0)
  return jnp.where(pairs, score, 0.0)


def expanded_from_scores(pair_scores, adj, in_sequence):
  """HyGRL's path-aware score: the best link from the current sequence.

  ``score(v) = max_{u in sequence, u ~ v} pair_scores[u, v]``, 0 if no
  sequence node is adjacent to ``v``. Computed for every node; sequence
  nodes themselves are scored too, so callers mask them out as candidates.

  Args:
    pair_scores: float32 [N, N] (e.g. :func:`adamic_adar`, :func:`jaccard`).
    adj: bool [N, N]; in_sequence: bool [N].

  Returns:
    float32 [N].
  """
  link = adj & in_sequence[:, None]
  best = jnp.max(jnp.where(link, pair_scores, -jnp.inf), axis=0)
  return jnp.where(jnp.any(link, axis=0), best, 0.0).astype(jnp.float32)


def semantic_scores(node_emb, context):
  """Cosine similarity of every node embedding to ``context``.

  Args:
    node_emb: float32 [N, d] (unit rows; rows are normalized anyway, zero
      rows such as padding score 0).
    context: float32 [d], any vector; normalized here.

  Returns:
    float32 [N] in [-1, 1]; all zeros for a zero ``context``.
  """
  return jnp.matmul(_safe_unit(node_emb), _safe_unit(context),
                    precision=_HIGHEST)


def sequence_context(query, node_emb, in_sequence):
  """HyGRL's "question ⊕ current sequence" context vector.

  Args:
    query: float32 [d]; node_emb: float32 [N, d]; in_sequence: bool [N].

  Returns:
    float32 [d]: unit vector of ``query + mean(node_emb[in_sequence])`` (the
    mean is 0 for an empty sequence); zeros if that sum is zero.
  """
  seq = in_sequence.astype(jnp.float32)
  total = jnp.sum(seq)
  mean = jnp.matmul(seq, node_emb, precision=_HIGHEST) / jnp.maximum(total,
                                                                     1.0)
  return _safe_unit(query + mean)


def normalize_per_question(scores, candidate_mask):
  """Scales one question's scores to [0, 1] so heuristics can be fused.

  ``max(s, 0) / max_{candidates} max(s, 0)``: negatives clip to 0, the best
  candidate gets 1; all zeros when no candidate scores above 0.

  Args:
    scores: float [N]; candidate_mask: bool [N].

  Returns:
    float32 [N]; 0 on non-candidates.
  """
  s = jnp.where(candidate_mask, jnp.maximum(scores, 0.0), 0.0)
  top = jnp.max(s)
  return jnp.where(top > 0, s / jnp.where(top > 0, top, 1.0), 0.0).astype(
      jnp.float32)


def fuse(metrics, theta):
  """Fused score ``S = sum_k softmax(theta)_k m_k``.

  Args:
    metrics: float [..., M] (normalized heuristics); theta: float [M].

  Returns:
    float32 [...].
  """
  return jnp.sum(metrics * jax.nn.softmax(theta), axis=-1)


@functools.partial(jax.jit, static_argnames=("steps", "learning_rate"))
def calibrate_fusion(metrics, labels, *, steps: int = 300,
                     learning_rate: float = 0.1, seed=0):
  """Fits the fusion weights on a small labeled set.

  Minimizes the mean binary cross-entropy of the logistic model
  ``sigmoid(a * fuse(metrics, theta) + b)`` over ``(theta, a, b)`` with Adam
  in one ``fori_loop``. ``a = softplus(.)`` is kept positive (metrics are
  "higher is better"; a negative ``a`` would reward the metric that is
  *lowest* on positives) and starts at 1, ``b`` at the logit of the label
  rate, ``theta`` near 0 (uniform weights, a small ``seed``-ed jitter).
  Only ``theta`` is returned: ``a`` and ``b`` just let the fused score meet
  the labels, and ranking candidates by ``fuse`` does not need them.

  Args:
    metrics: float [P, M] normalized heuristics of P labeled candidates.
    labels: bool [P]; the candidate lies on a shortest path to the gold
      answer.
    steps, learning_rate: Adam schedule (static).
    seed: int, for the initial jitter.

  Returns:
    float32 [M] theta; the fusion weights are ``softmax(theta)``.
  """
  metrics = metrics.astype(jnp.float32)
  target = labels.astype(jnp.float32)
  m = metrics.shape[-1]
  key = jax.random.PRNGKey(seed)
  rate = jnp.clip(jnp.mean(target), 1e-3, 1.0 - 1e-3)
  params = (0.01 * jax.random.normal(key, (m,)), jnp.float32(_SOFTPLUS_INV_1),
            jnp.log(rate) - jnp.log1p(-rate))
  opt = optax.adam(learning_rate)

  def loss_fn(p):
    theta, raw_a, b = p
    logit = jax.nn.softplus(raw_a) * fuse(metrics, theta) + b
    return jnp.mean(optax.sigmoid_binary_cross_entropy(logit, target))

  def step(_, carry):
    p, state = carry
    grads = jax.grad(loss_fn)(p)
    updates, state = opt.update(grads, state, p)
    return optax.apply_updates(p, updates), state

  params, _ = jax.lax.fori_loop(0, steps, step, (params, opt.init(params)))
  return params[0]
