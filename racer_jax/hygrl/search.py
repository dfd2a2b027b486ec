"""HyGRL retrieval as jitted programs: inputs, scorers, updates, evaluation.

Per question: the graph heuristics (PPR from the question concepts,
Adamic-Adar, Jaccard, semantic match) give each frontier candidate four
normalized metrics; their fusion ``S`` (weights θ calibrated once, then
frozen) is the HyGRL-Heuristic scorer and the imitation teacher; the
learned policy σ(MLP([S_window ‖ A])) scores candidates from their
embedding and their metrics. Both drive
:func:`racer_jax.hygrl.beam.beam_search`.

Whether a candidate grounds an answer choice is known at inference in
multiple-choice QA, and about a third of a subgraph's nodes do. For a
comparison on equal information both scorers may use it or not:
``HyGRLConfig.policy_choice`` adds it to the policy's features,
``heuristic_choice`` adds it to the fusion as a fifth metric (calibrated
with the other four).

Training (imitation, then SCST + margin) is :mod:`racer_jax.hygrl.update`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from racer_jax.hygrl import heuristics, teacher
from racer_jax.hygrl import beam
from racer_jax.hygrl import pairs as hygrl_pairs
from racer_jax.walker.policy import HyGRLPolicy

METRICS = ("ppr", "adamic_adar", "jaccard", "semantic")


@dataclasses.dataclass(frozen=True)
class HyGRLConfig:
  """Static settings (hashable)."""
  beam: beam.BeamConfig = beam.BeamConfig()
  heuristic_tau: float = 0.5
  restart_prob: float = 0.15
  ppr_iters: int = 80
  label_high: float = 0.7
  label_low: float = 0.3
  pairs_per_step: int = 8
  margin: float = 1.0
  margin_weight: float = 0.5
  scst_gamma: float = 1.0
  policy_choice: bool = True      # the policy sees "grounds a choice"
  heuristic_choice: bool = False  # the fusion has it as a fifth metric
  # "embedding": the window's and candidates' vectors with the four
  # metrics; "scores": HyGRL's (2L+1)-dim state-action vector of relevance
  # scores (:func:`score_features`); "scores_heuristics": that and the
  # four metrics.
  policy_features: str = "embedding"
  # SCST's reward: "sufficient" (a gold node connected to a seed in the
  # retrieved subgraph) or "gold_recall" (share of gold nodes retrieved).
  reward: str = "sufficient"
  # m_ce(Q ⊕ N_s, a) by a cross-encoder at every search state (the
  # inputs then carry :class:`hygrl_pairs.PairInputs`): a
  # :class:`hygrl_pairs.PairScorer`, or None
  pair_scorer: Any = None
  # HyGRL-Heuristic's semantic metric: "cosine" (the bi-encoder's cosine
  # with the question ⊕ sequence context), "relevance" (the inputs'
  # cross-encoder m_ce(Q, n): the paper's m_ce) or "auto" (relevance when
  # the inputs carry it)
  heuristic_semantic: str = "cosine"
  # Adamic-Adar and Jaccard of a candidate: "sequence" (its best link to
  # any sequence node; this project's first form) or "current" (to v_cur,
  # the node added last, as the paper writes)
  pair_anchor: str = "sequence"


def anchor_of(cfg: HyGRLConfig, window):
  """v_cur (``window[0]``, the node added last; -1 none) when the pair
  metrics are anchored there, else None (any sequence node)."""
  if cfg.pair_anchor not in ("sequence", "current"):
    raise ValueError(f"hygrl.pair_anchor={cfg.pair_anchor!r}: 'sequence' "
                     "or 'current'")
  return window[0] if cfg.pair_anchor == "current" else None


def fusion_metrics(cfg: HyGRLConfig) -> tuple[str, ...]:
  """The names of the fused heuristic's metrics (θ has one per name)."""
  return METRICS + (("choice",) if cfg.heuristic_choice else ())


@flax.struct.dataclass
class HyGRLInputs:
  """One question (leading axis B when batched).

  Attributes:
    adj: bool [N, N]; node_mask, seeds, gold: bool [N].
    choice: bool [N] grounds some answer choice (known at inference).
    node_emb: float32 [N, d]; query: float32 [d].
    ppr: float32 [N]; adamic_adar, jaccard: float32 [N, N].
    gold_distance: int32 [N] hops to the gold answer's concepts.
    usable: bool [] has question and gold concepts (a real, labeled row).
    relevance: float32 [N] m_ce(Q, n) from a cross-encoder, or None (the
      bi-encoder's cosines instead; :func:`score_features`).
    pair: :class:`hygrl_pairs.PairInputs` for m_ce at every search state,
      or None.
    semantic: float32 [N] HyGRL-Heuristic's semantic metric when it is not
      the cosine with the context (the cross-encoder's m_ce), or None.
  """
  adj: jax.Array
  node_mask: jax.Array
  seeds: jax.Array
  gold: jax.Array
  choice: jax.Array
  node_emb: jax.Array
  query: jax.Array
  ppr: jax.Array
  adamic_adar: jax.Array
  jaccard: jax.Array
  gold_distance: jax.Array
  usable: jax.Array
  relevance: Any = None
  pair: Any = None
  semantic: Any = None


def graph_tables(senders, receivers, edge_mask, node_mask, seeds, gold,
                 cfg: HyGRLConfig):
  """Per question of a batch of padded graphs (leading axis B): the dense
  adjacency [B, N, N], PPR from the seeds [B, N], Adamic-Adar and Jaccard
  [B, N, N] and the BFS distance to the gold nodes [B, N]."""
  def one(s, r, em, nm, sd, gd):
    adj = heuristics.dense_adjacency(s, r, em, nm.shape[0])
    ppr = heuristics.personalized_pagerank(
        s, r, em, nm, sd, restart_prob=cfg.restart_prob,
        num_iters=cfg.ppr_iters)
    return (adj, ppr, heuristics.adamic_adar(adj, nm),
            heuristics.jaccard(adj, nm),
            teacher.bfs_distance(s, r, em, gd, nm))

  return jax.vmap(one)(senders, receivers, edge_mask, node_mask, seeds, gold)


def hygrl_inputs(batch, concept_emb, cfg: HyGRLConfig) -> HyGRLInputs:
  """Builds the batched inputs from a GraphBatch (jittable)."""
  nodes = batch.graphs.nodes
  node_emb = jnp.where(batch.node_mask[..., None],
                       concept_emb[jnp.maximum(nodes["concept"], 0)], 0.0)
  gold_col = jnp.maximum(batch.gold, 0)[:, None, None]
  gold = (jnp.take_along_axis(batch.choice_mask, gold_col, axis=2)[..., 0] &
          batch.node_mask & (batch.gold >= 0)[:, None])
  seeds = nodes["is_question"] & batch.node_mask

  adj, ppr, aa, jac, dist = graph_tables(
      batch.graphs.senders, batch.graphs.receivers, batch.edge_mask,
      batch.node_mask, seeds, gold, cfg)
  choice = jnp.any(batch.choice_mask & batch.choice_valid[:, None, :],
                   axis=2) & batch.node_mask
  return HyGRLInputs(adj=adj, node_mask=batch.node_mask, seeds=seeds,
                     gold=gold, choice=choice, node_emb=node_emb,
                     query=batch.query, ppr=ppr,
                     adamic_adar=aa, jaccard=jac, gold_distance=dist,
                     usable=batch.example_mask & jnp.any(seeds, 1) &
                     jnp.any(gold, 1))


def candidate_metrics(x: HyGRLInputs, in_sequence, frontier,
                      with_choice: bool = False, current=None):
  """float32 [N, 4] (or [N, 5] ``with_choice``): normalized PPR,
  path-aware Adamic-Adar and Jaccard (to ``current``, int32 [] v_cur, when
  given; else the best link from the sequence), semantic match with the
  question ⊕ sequence context (and whether the node grounds an answer
  choice)."""
  if x.semantic is None:
    context = heuristics.sequence_context(x.query, x.node_emb, in_sequence)
    semantic = heuristics.semantic_scores(x.node_emb, context)
  else:
    semantic = x.semantic
  if current is None:
    pair = lambda m: heuristics.expanded_from_scores(m, x.adj, in_sequence)
  else:
    pair = lambda m: jnp.where(current >= 0, m[jnp.maximum(current, 0)],
                               0.0).astype(jnp.float32)
  raw = (x.ppr, pair(x.adamic_adar), pair(x.jaccard), semantic)
  if with_choice:
    raw += (x.choice.astype(jnp.float32),)
  return jnp.stack([heuristics.normalize_per_question(m, frontier)
                    for m in raw], axis=-1)


def heuristic_prob(theta, x: HyGRLInputs, in_sequence, frontier,
                   with_choice: bool = False, current=None):
  """The fused score S in (0, 1) of every node (HyGRL-Heuristic); θ has
  one entry per metric (:func:`fusion_metrics`)."""
  s = heuristics.fuse(candidate_metrics(x, in_sequence, frontier,
                                        with_choice, current), theta)
  return jnp.clip(s, 1e-6, 1.0 - 1e-6)


def score_features(x: HyGRLInputs, window, in_sequence):
  """HyGRL's state-action vector of relevance scores m, window L =
  ``window.shape[0]``.

  Returns ``(state [L, 1], action [N, L + 1])``: state_i = m(Q, n_i) for
  the window's nodes n_1..n_L (most recent first), action(a) = (m(n_1, a),
  .., m(n_L, a), m(Q ⊕ N_s, a)); zeros where |N_s| < L. Together the
  2L + 1 numbers the policy reads for candidate a.

  m is the cosine of unit vectors (a bi-encoder), Q ⊕ N_s the question and
  the whole sequence (:func:`heuristics.sequence_context`). A cross-encoder
  replaces m(Q, n_i) and m(Q ⊕ N_s, a) by σ of its logit: with ``x.pair``
  at every state, m_ce(Q, n_i) and m_ce(Q ⊕ N_s, a) with N_s the window's
  titles, and with ``x.pair.scorer.node_pairs`` m_ce(n_i, a) too
  (:func:`hygrl_pairs.state_relevance`); with ``x.relevance`` (a table
  computed once per question from the question and its seeds N_0)
  m_ce(Q ⊕ N_0, ·) for both question entries. Otherwise node-to-node m is
  the cosine (XLA drops it where the cross-encoder's replaces it).
  """
  valid = window >= 0
  wv = jnp.where(valid[:, None], x.node_emb[jnp.maximum(window, 0)], 0.0)
  hi = jax.lax.Precision.HIGHEST
  pair = jnp.matmul(x.node_emb, wv.T, precision=hi)          # [N, L]
  if x.pair is not None:
    state, joint, node_pair = hygrl_pairs.state_relevance(
        x.pair, x.node_mask, window)
    pair = pair if node_pair is None else node_pair
  elif x.relevance is None:
    state = jnp.where(valid, jnp.matmul(wv, x.query, precision=hi), 0.0)
    context = heuristics.sequence_context(x.query, x.node_emb, in_sequence)
    joint = heuristics.semantic_scores(x.node_emb, context)
  else:
    state = jnp.where(valid, x.relevance[jnp.maximum(window, 0)], 0.0)
    joint = x.relevance
  return state[:, None], jnp.concatenate([pair, joint[:, None]], axis=-1)


def policy_logits(policy: HyGRLPolicy, params, x: HyGRLInputs, window,
                  in_sequence, frontier, choice_feature: bool = True,
                  features: str = "embedding", current=None):
  """float32 [N] policy logits of every node as a candidate
  (``features``: :attr:`HyGRLConfig.policy_features`)."""
  if features == "embedding":
    window_features = jnp.where((window >= 0)[:, None],
                                x.node_emb[jnp.maximum(window, 0)], 0.0)
    parts = [x.node_emb, candidate_metrics(x, in_sequence, frontier,
                                           current=current)]
  else:
    window_features, action = score_features(x, window, in_sequence)
    parts = [action]
    if features == "scores_heuristics":
      parts.append(candidate_metrics(x, in_sequence, frontier,
                                     current=current))
  if choice_feature:
    parts.append(x.choice[:, None].astype(x.node_emb.dtype))
  return policy.apply(params, window_features,
                      jnp.concatenate(parts, axis=-1))


def feature_widths(embed_dim: int, window: int, choice_feature: bool,
                   features: str) -> tuple[int, int]:
  """(state row width, candidate width) of the policy's inputs."""
  if features not in ("embedding", "scores", "scores_heuristics"):
    raise ValueError(f"policy_features={features!r}; expected embedding, "
                     "scores or scores_heuristics")
  if features == "embedding":
    return embed_dim, embed_dim + len(METRICS) + int(choice_feature)
  extra = len(METRICS) if features == "scores_heuristics" else 0
  return 1, window + 1 + extra + int(choice_feature)


def init_hygrl_policy(policy: HyGRLPolicy, rng, embed_dim: int,
                      window: int, choice_feature: bool = True,
                      features: str = "embedding"):
  state_width, width = feature_widths(embed_dim, window, choice_feature,
                                      features)
  return policy.init(rng, jnp.zeros((window, state_width)),
                     jnp.zeros((2, width)))


def search(x: HyGRLInputs, cfg: HyGRLConfig, *, policy=None, params=None,
           theta=None, rng=None, sample: bool = False):
  """One question's beam search with the policy (``params`` given) or the
  fused heuristic (``theta`` given). No gradient flows through it."""
  if params is not None:
    params = jax.lax.stop_gradient(params)
    scorer = lambda w, s, f: policy_logits(policy, params, x, w, s, f,
                                           cfg.policy_choice,
                                           cfg.policy_features,
                                           anchor_of(cfg, w))
    config = cfg.beam
  else:
    def scorer(w, s, f):
      prob = heuristic_prob(theta, x, s, f, cfg.heuristic_choice,
                            anchor_of(cfg, w))
      return jnp.log(prob) - jnp.log1p(-prob)
    config = dataclasses.replace(cfg.beam, tau=cfg.heuristic_tau)
  return beam.beam_search(scorer, x.adj, x.node_mask, x.seeds, config,
                          rng=rng, sample=sample)


def _sufficient(x: HyGRLInputs, final, cfg: HyGRLConfig):
  """The search's SCST reward (:attr:`HyGRLConfig.reward`)."""
  if cfg.reward == "gold_recall":
    return (jnp.sum(final.in_sequence & x.gold) /
            jnp.maximum(jnp.sum(x.gold), 1)).astype(jnp.float32)
  return beam.sufficient(x.adj, final.in_sequence, x.seeds, x.gold,
                         cfg.beam.max_nodes + 1).astype(jnp.float32)


def _trace_logits(policy, params, x, trace, cfg: HyGRLConfig):
  """Differentiable policy logits at every recorded state [D, N]."""
  return jax.vmap(lambda w, s, f: policy_logits(
      policy, params, x, w, s, f, cfg.policy_choice, cfg.policy_features,
      anchor_of(cfg, w)))(trace.window, trace.in_sequence, trace.frontier)


def calibration_batch(batch, concept_emb, cfg: HyGRLConfig):
  """Metrics and labels of the first-step candidates (neighbors of the
  question concepts) of a batch: label = on a shortest path from a question
  concept to the gold answer. Returns ``(metrics [B, N, M], labels [B, N],
  mask [B, N])``, M per :func:`fusion_metrics`."""
  return calibration_of(hygrl_inputs(batch, concept_emb, cfg),
                        batch.graphs.senders, batch.graphs.receivers,
                        batch.edge_mask, cfg)


def calibration_of(x: HyGRLInputs, senders, receivers, edge_mask,
                   cfg: HyGRLConfig):
  """The first-step candidates' metrics [B, N, M], labels [B, N] (on a
  shortest seed-to-gold path) and mask [B, N] of batched inputs ``x`` and
  their edge lists [B, E]."""
  def one(x, s, r, em):
    frontier = beam.frontier_of(x.adj, x.seeds, x.node_mask)
    dq = teacher.bfs_distance(s, r, em, x.seeds, x.node_mask)
    total = dq + x.gold_distance
    shortest = jnp.min(jnp.where(x.node_mask, total, teacher.UNREACHABLE))
    label = (total == shortest) & (shortest < teacher.UNREACHABLE)
    start = beam.window_nodes(beam.initial_state(x.seeds, x.node_mask),
                              cfg.beam.window)
    return (candidate_metrics(x, x.seeds, frontier, cfg.heuristic_choice,
                              anchor_of(cfg, start)),
            label, frontier & x.usable)

  return jax.vmap(one)(x, senders, receivers, edge_mask)


def make_retrieval_eval(policy: HyGRLPolicy, cfg: HyGRLConfig):
  """``eval(params, batch, concept_emb, theta)`` -> per question: for the
  learned policy and the fused heuristic, ``recall_*`` (share of gold
  concepts retrieved), ``nodes_*`` (subgraph size), ``sufficient_*``;
  ``labeled`` bool [B] (has gold concepts)."""
  def evaluate(params, batch, concept_emb, theta):
    x = hygrl_inputs(batch, concept_emb, cfg)

    def one(x):
      out = {}
      for name, kwargs in (("policy", dict(policy=policy, params=params)),
                           ("heuristic", dict(theta=theta))):
        final, _ = search(x, cfg, **kwargs)
        sel = final.in_sequence
        n_gold = jnp.sum(x.gold)
        out[f"recall_{name}"] = jnp.sum(sel & x.gold) / jnp.maximum(n_gold,
                                                                    1)
        out[f"nodes_{name}"] = jnp.sum(sel)
        out[f"sufficient_{name}"] = _sufficient(x, final, cfg)
        out[f"selected_{name}"] = sel
      return out

    out = jax.vmap(one)(x)
    out["labeled"] = batch.example_mask & jnp.any(x.gold, axis=1)
    return out

  return jax.jit(evaluate)


Params = Any
