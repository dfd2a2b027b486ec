"""HyGRL on a passage graph (multi-hop QA): its inputs, fusion calibration
and retrieval, as jitted programs over padded per-question graphs.

A batch (host NumPy, leading axis B; built by
:mod:`racer_jax.hygrl.multihop_workspace`) holds per question:

* ``nodes`` int32 [B, N]: global node ids of the question's subgraph
  (:func:`racer_jax.kg.passage_graph.question_subgraph`), -1 padding;
* ``seeds`` bool [B, N]: the linked seed entities;
* ``senders``, ``receivers`` int32 [B, E], ``edge_mask`` bool [B, E];
* ``gold`` bool [B, N]: gold passages (training only: labels);
* ``query`` float32 [B, d]: the question's unit vector;
* ``example_mask`` bool [B]: a real row;
* optionally ``relevance`` float32 [B, N]: m_ce of every node
  (:mod:`racer_jax.hygrl.multihop_relevance`);
* with ``HyGRLConfig.pair_scorer`` (m_ce at every search state):
  ``pair_question`` int32 [B, Tq] and ``pair_question_len`` int32 [B], the
  question's tokens.

The tables passed with it: every node's unit vector [V, d], or a dict of
``node_vecs`` and, for the pair scorer, ``ce_params`` (the cross-encoder's
parameters), ``pair_titles`` int32 [V, Tt], ``pair_title_len`` int32 [V],
``pair_texts`` int32 [V, S], ``pair_text_len`` int32 [V] (every node's
title and text tokens, :func:`racer_jax.text.pair_tokens.piece_table`).
The beam, the heuristics, the policy and the losses are
:mod:`racer_jax.hygrl.search`'s.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from racer_jax.hygrl import beam
from racer_jax.hygrl import pairs as hygrl_pairs
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl.search import HyGRLConfig, HyGRLInputs

BATCH_KEYS = ("nodes", "seeds", "senders", "receivers", "edge_mask", "gold",
              "query", "example_mask")


def passage_inputs(batch, tables, cfg: HyGRLConfig) -> HyGRLInputs:
  """:class:`HyGRLInputs` of a passage-graph batch (jittable)."""
  node_vecs = tables["node_vecs"] if isinstance(tables, dict) else tables
  nodes = batch["nodes"]
  node_mask = nodes >= 0
  node_emb = jnp.where(node_mask[..., None],
                       node_vecs[jnp.maximum(nodes, 0)], 0.0)
  seeds = batch["seeds"] & node_mask
  gold = batch["gold"] & node_mask

  adj, ppr, aa, jac, dist = hygrl.graph_tables(
      batch["senders"], batch["receivers"], batch["edge_mask"], node_mask,
      seeds, gold, cfg)
  relevance = (jnp.where(node_mask, batch["relevance"], 0.0)
               if "relevance" in batch else None)
  mode = cfg.heuristic_semantic
  if mode not in ("cosine", "relevance", "auto"):
    raise ValueError(f"hygrl.heuristic_semantic={mode!r}: 'cosine', "
                     "'relevance' or 'auto'")
  if mode == "relevance" and relevance is None:
    raise ValueError("hygrl.heuristic_semantic='relevance' reads the "
                     "cross-encoder's m_ce(Q, n): set multihop.relevance="
                     "cross_encoder")
  return HyGRLInputs(
      adj=adj, node_mask=node_mask, seeds=seeds, gold=gold,
      choice=jnp.zeros_like(node_mask), node_emb=node_emb,
      query=batch["query"], ppr=ppr, adamic_adar=aa, jaccard=jac,
      gold_distance=dist,
      usable=batch["example_mask"] & jnp.any(seeds, 1) & jnp.any(gold, 1),
      relevance=relevance,
      pair=_pair_inputs(batch, tables, cfg),
      semantic=relevance if mode != "cosine" else None)


def _pair_inputs(batch, tables, cfg: HyGRLConfig):
  scorer = cfg.pair_scorer
  if scorer is None:
    return None
  if not isinstance(tables, dict) or "ce_params" not in tables:
    raise ValueError("HyGRLConfig.pair_scorer needs the cross-encoder's "
                     "tables (ce_params, pair_titles, pair_texts, ...)")
  g = jnp.maximum(batch["nodes"], 0)
  real = batch["nodes"] >= 0
  return hygrl_pairs.PairInputs(
      question=batch["pair_question"],
      question_len=batch["pair_question_len"],
      titles=tables["pair_titles"][g],
      title_len=jnp.where(real, tables["pair_title_len"][g], 0),
      texts=tables["pair_texts"][g],
      text_len=jnp.where(real, tables["pair_text_len"][g], 0),
      scorer=scorer,
      logits=functools.partial(scorer.apply, tables["ce_params"]))


def calibration_batch(batch, node_vecs, cfg: HyGRLConfig):
  """The fusion's calibration data: metrics and labels of the first-step
  candidates (neighbors of the seeds); label = on a shortest path from a
  seed to a gold passage. ``(metrics [B, N, M], labels [B, N], mask [B,
  N])``. The policy plays no part: no cross-encoder runs."""
  cfg = dataclasses.replace(cfg, pair_scorer=None)
  return hygrl.calibration_of(passage_inputs(batch, node_vecs, cfg),
                              batch["senders"], batch["receivers"],
                              batch["edge_mask"], cfg)


def make_passage_retrieval(policy, cfg: HyGRLConfig):
  """``retrieve(params, batch, node_vecs, theta)`` -> per question, for the
  policy (``params``) and the fused heuristic (``theta``):
  ``position_*`` int32 [B, N] (order in the final sequence, -1 outside),
  ``rest_*`` float32 [B, N] (the scorer's logit of every node outside the
  sequence at the final state, for ranking beyond it), ``scored_*`` int32
  [B] (candidates scored over the steps: the search's cost), ``added_*``
  int32 [B] (nodes the search added: its budget used). Jitted."""
  def retrieve(params, batch, node_vecs, theta):
    x = passage_inputs(batch, node_vecs, cfg)

    def one(x):
      out = {}
      scorers = {
          "policy": lambda w, s, f: hygrl.policy_logits(
              policy, params, x, w, s, f, cfg.policy_choice,
              cfg.policy_features, hygrl.anchor_of(cfg, w)),
          "heuristic": lambda w, s, f: _heuristic_logit(theta, x, w, s, f,
                                                        cfg)}
      for name, scorer in scorers.items():
        kwargs = (dict(policy=policy, params=params) if name == "policy"
                  else dict(theta=theta))
        final, trace = hygrl.search(x, cfg, **kwargs)
        rest = x.node_mask & ~final.in_sequence
        window = beam.window_nodes(final, cfg.beam.window)
        out[f"position_{name}"] = final.position
        out[f"rest_{name}"] = jnp.where(
            rest, scorer(window, final.in_sequence, rest), -jnp.inf)
        out[f"scored_{name}"] = jnp.sum(
            trace.frontier & trace.active[:, None]).astype(jnp.int32)
        out[f"added_{name}"] = final.added
      return out

    return jax.vmap(one)(x)

  return jax.jit(retrieve)


def _heuristic_logit(theta, x, window, in_sequence, frontier, cfg):
  prob = hygrl.heuristic_prob(theta, x, in_sequence, frontier,
                              cfg.heuristic_choice,
                              hygrl.anchor_of(cfg, window))
  return jnp.log(prob) - jnp.log1p(-prob)
