"""HyGRL retrieval as jitted programs: inputs, scorers, updates, evaluation.

Per question: the graph heuristics (PPR from the question concepts,
Adamic-Adar, Jaccard, semantic match) give each frontier candidate four
normalized metrics; their fusion ``S`` (weights θ calibrated once, then
frozen) is the HyGRL-Heuristic scorer and the imitation teacher; the
learned policy σ(MLP([S_window ‖ A])) scores candidates from their
embedding and their metrics. Both drive
:func:`racer_jax.graph.beam.beam_search`.

Whether a candidate grounds an answer choice is known at inference in
multiple-choice QA, and about a third of a subgraph's nodes do. For a
comparison on equal information both scorers may use it or not:
``HyGRLConfig.policy_choice`` adds it to the policy's features,
``heuristic_choice`` adds it to the fusion as a fifth metric (calibrated
with the other four).

Training (one jitted program per stage, data parallel like the walker):
imitation = BCE against the fused heuristic's confident labels on the
states of the heuristic's own greedy search; RL = SCST (a sampled and a
greedy search of the same policy through the same code path, reward = the
retrieved subgraph is sufficient) + λ · pairwise margin ranking with the
offline mentor (prefer the candidate closer to the gold answer; ties: higher
fused score).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from racer_jax.graph import beam, heuristics, teacher
from racer_jax.rl import losses
from racer_jax.rl.policy import HyGRLPolicy
from racer_jax.rl.train import TrainState, apply_guarded

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


def hygrl_inputs(batch, concept_emb, cfg: HyGRLConfig) -> HyGRLInputs:
  """Builds the batched inputs from a GraphBatch (jittable)."""
  nodes = batch.graphs.nodes
  node_emb = jnp.where(batch.node_mask[..., None],
                       concept_emb[jnp.maximum(nodes["concept"], 0)], 0.0)
  gold_col = jnp.maximum(batch.gold, 0)[:, None, None]
  gold = (jnp.take_along_axis(batch.choice_mask, gold_col, axis=2)[..., 0] &
          batch.node_mask & (batch.gold >= 0)[:, None])
  seeds = nodes["is_question"] & batch.node_mask

  def one(s, r, em, nm, sd, gd):
    adj = heuristics.dense_adjacency(s, r, em, nm.shape[0])
    ppr = heuristics.personalized_pagerank(
        s, r, em, nm, sd, restart_prob=cfg.restart_prob,
        num_iters=cfg.ppr_iters)
    return (adj, ppr, heuristics.adamic_adar(adj, nm),
            heuristics.jaccard(adj, nm),
            teacher.bfs_distance(s, r, em, gd, nm))

  adj, ppr, aa, jac, dist = jax.vmap(one)(
      batch.graphs.senders, batch.graphs.receivers, batch.edge_mask,
      batch.node_mask, seeds, gold)
  choice = jnp.any(batch.choice_mask & batch.choice_valid[:, None, :],
                   axis=2) & batch.node_mask
  return HyGRLInputs(adj=adj, node_mask=batch.node_mask, seeds=seeds,
                     gold=gold, choice=choice, node_emb=node_emb,
                     query=batch.query, ppr=ppr,
                     adamic_adar=aa, jaccard=jac, gold_distance=dist,
                     usable=batch.example_mask & jnp.any(seeds, 1) &
                     jnp.any(gold, 1))


def candidate_metrics(x: HyGRLInputs, in_sequence, frontier,
                      with_choice: bool = False):
  """float32 [N, 4] (or [N, 5] ``with_choice``): normalized PPR,
  path-aware Adamic-Adar and Jaccard, semantic match with the question ⊕
  sequence context (and whether the node grounds an answer choice)."""
  context = heuristics.sequence_context(x.query, x.node_emb, in_sequence)
  raw = (x.ppr,
         heuristics.expanded_from_scores(x.adamic_adar, x.adj, in_sequence),
         heuristics.expanded_from_scores(x.jaccard, x.adj, in_sequence),
         heuristics.semantic_scores(x.node_emb, context))
  if with_choice:
    raw += (x.choice.astype(jnp.float32),)
  return jnp.stack([heuristics.normalize_per_question(m, frontier)
                    for m in raw], axis=-1)


def heuristic_prob(theta, x: HyGRLInputs, in_sequence, frontier,
                   with_choice: bool = False):
  """The fused score S in (0, 1) of every node (HyGRL-Heuristic); θ has
  one entry per metric (:func:`fusion_metrics`)."""
  s = heuristics.fuse(candidate_metrics(x, in_sequence, frontier,
                                        with_choice), theta)
  return jnp.clip(s, 1e-6, 1.0 - 1e-6)


def policy_logits(policy: HyGRLPolicy, params, x: HyGRLInputs, window,
                  in_sequence, frontier, choice_feature: bool = True):
  """float32 [N] policy logits of every node as a candidate."""
  window_features = jnp.where((window >= 0)[:, None],
                              x.node_emb[jnp.maximum(window, 0)], 0.0)
  parts = [x.node_emb, candidate_metrics(x, in_sequence, frontier)]
  if choice_feature:
    parts.append(x.choice[:, None].astype(x.node_emb.dtype))
  return policy.apply(params, window_features,
                      jnp.concatenate(parts, axis=-1))


def init_hygrl_policy(policy: HyGRLPolicy, rng, embed_dim: int,
                      window: int, choice_feature: bool = True):
  width = embed_dim + len(METRICS) + int(choice_feature)
  return policy.init(rng, jnp.zeros((window, embed_dim)),
                     jnp.zeros((2, width)))


def search(x: HyGRLInputs, cfg: HyGRLConfig, *, policy=None, params=None,
           theta=None, rng=None, sample: bool = False):
  """One question's beam search with the policy (``params`` given) or the
  fused heuristic (``theta`` given). No gradient flows through it."""
  if params is not None:
    params = jax.lax.stop_gradient(params)
    scorer = lambda w, s, f: policy_logits(policy, params, x, w, s, f,
                                           cfg.policy_choice)
    config = cfg.beam
  else:
    def scorer(w, s, f):
      del w
      prob = heuristic_prob(theta, x, s, f, cfg.heuristic_choice)
      return jnp.log(prob) - jnp.log1p(-prob)
    config = dataclasses.replace(cfg.beam, tau=cfg.heuristic_tau)
  return beam.beam_search(scorer, x.adj, x.node_mask, x.seeds, config,
                          rng=rng, sample=sample)


def _sufficient(x: HyGRLInputs, final, cfg: HyGRLConfig):
  return beam.sufficient(x.adj, final.in_sequence, x.seeds, x.gold,
                         cfg.beam.max_nodes + 1).astype(jnp.float32)


def _trace_logits(policy, params, x, trace, cfg: HyGRLConfig):
  """Differentiable policy logits at every recorded state [D, N]."""
  return jax.vmap(lambda w, s, f: policy_logits(
      policy, params, x, w, s, f, cfg.policy_choice))(
          trace.window, trace.in_sequence, trace.frontier)


def imitation_loss(params, policy, x: HyGRLInputs, theta, cfg: HyGRLConfig):
  """BCE against confident fused-heuristic labels, on the heuristic's own
  greedy search states; returns (loss, metrics)."""
  def one(x):
    final, trace = search(x, cfg, theta=theta)
    logits = _trace_logits(policy, params, x, trace, cfg)
    s = jax.vmap(lambda st, f: heuristic_prob(theta, x, st, f,
                                              cfg.heuristic_choice))(
        trace.in_sequence, trace.frontier)
    confident = (s >= cfg.label_high) | (s <= cfg.label_low)
    mask = trace.frontier & confident & trace.active[:, None] & x.usable
    per = optax.sigmoid_binary_cross_entropy(
        logits, (s >= cfg.label_high).astype(jnp.float32))
    return jnp.sum(per * mask), jnp.sum(mask)
  total, count = jax.vmap(one)(x)
  loss = jnp.sum(total) / jnp.maximum(jnp.sum(count), 1.0)
  return loss, {"loss": loss, "labels": jnp.sum(count)}


def offline_mentor(x: HyGRLInputs, first, second, fused_first,
                   fused_second):
  """The default preference mentor: prefer the candidate on a shorter path
  to the gold answer; on a tie, the one with the higher fused score.

  A mentor maps candidate pairs (int32 [...], plus their fused scores) to
  int32 preferences: +1 prefers ``first``, -1 ``second``, 0 none. Another
  mentor (e.g. an LLM's verdicts, computed on the host and fed in as
  arrays) is a function with the same signature.
  """
  gd_a, gd_b = x.gold_distance[first], x.gold_distance[second]
  return jnp.where(gd_a != gd_b, jnp.sign(gd_b - gd_a),
                   jnp.sign(fused_first - fused_second)).astype(jnp.int32)


def _pairs(rng, trace, x: HyGRLInputs, theta, cfg: HyGRLConfig,
           mentor=offline_mentor):
  """Random candidate pairs per step and the mentor's preference.

  Returns ``(first, second, preference)`` int32 [D, P] each; preference +1
  prefers ``first``, -1 ``second``, 0 no preference (skipped)."""
  d_steps, p = trace.frontier.shape[0], cfg.pairs_per_step
  logits = jnp.where(trace.frontier, 0.0, -jnp.inf)          # uniform
  keys = jax.random.split(rng, 2)
  first = jax.random.categorical(keys[0], logits[:, None, :], axis=-1,
                                 shape=(d_steps, p))
  second = jax.random.categorical(keys[1], logits[:, None, :], axis=-1,
                                  shape=(d_steps, p))
  fused = jax.vmap(lambda st, f: heuristic_prob(
      theta, x, st, f, cfg.heuristic_choice))(
          trace.in_sequence, trace.frontier)                 # [D, N]
  pref = mentor(x, first, second, jnp.take_along_axis(fused, first, axis=1),
                jnp.take_along_axis(fused, second, axis=1))
  ok = (trace.active & jnp.any(trace.frontier, axis=1))[:, None] & (
      first != second)
  return first, second, jnp.where(ok, pref, 0).astype(jnp.int32)


def _rl_search(params, policy, x: HyGRLInputs, theta, key,
               cfg: HyGRLConfig):
  """One question's SCST rollouts and mentor pairs, from one key: the
  update and :func:`make_rl_proposal` derive the same searches from it."""
  k_sample, k_pairs = jax.random.split(key)
  final_s, trace_s = search(x, cfg, policy=policy, params=params,
                            rng=k_sample, sample=True)
  final_g, _ = search(x, cfg, policy=policy, params=params)
  first, second, pref = _pairs(k_pairs, trace_s, x, theta, cfg)
  return final_s, trace_s, final_g, first, second, pref


def _question_keys(rng, x: HyGRLInputs):
  return jax.random.split(rng, x.usable.shape[0])


def rl_loss(params, policy, x: HyGRLInputs, theta, rng, cfg: HyGRLConfig,
            external=None):
  """SCST + λ · margin ranking over the batch; returns (loss, metrics).

  ``external`` (host judgements, e.g. an LLM's) may hold ``pref`` int32
  [B, D, P] replacing the offline mentor's preferences and
  ``reward_sample`` / ``reward_greedy`` float32 [B] replacing the
  sufficiency rewards, for the searches :func:`make_rl_proposal` showed.
  """
  external = external or {}

  def one(x, key, ext):
    final_s, trace_s, final_g, first, second, pref = _rl_search(
        jax.lax.stop_gradient(params), policy, x, theta, key, cfg)
    r_s = ext.get("reward_sample", _sufficient(x, final_s, cfg))
    r_g = ext.get("reward_greedy", _sufficient(x, final_g, cfg))
    pref = ext.get("pref", pref)
    logits = _trace_logits(policy, params, x, trace_s, cfg)  # [D, N]
    step_lp = jax.vmap(losses.plackett_luce_log_prob)(
        logits, trace_s.passing, trace_s.chosen)
    log_prob = jnp.sum(jnp.where(trace_s.active, step_lp, 0.0))
    scst = losses.scst_loss(log_prob, r_s, r_g, cfg.scst_gamma)
    margin = losses.margin_ranking_loss(
        jnp.take_along_axis(logits, first, 1),
        jnp.take_along_axis(logits, second, 1), pref, cfg.margin)
    u = x.usable.astype(jnp.float32)
    return (scst * u, jnp.sum(margin) * u, jnp.sum(pref != 0) * u, r_s * u,
            r_g * u)
  scst, margin, pairs, r_s, r_g = jax.vmap(one)(x, _question_keys(rng, x),
                                                external)
  n = jnp.maximum(jnp.sum(x.usable), 1)
  l_scst = jnp.sum(scst) / n
  l_mr = jnp.sum(margin) / jnp.maximum(jnp.sum(pairs), 1.0)
  loss = l_scst + cfg.margin_weight * l_mr
  return loss, {"loss": loss, "scst_loss": l_scst, "margin_loss": l_mr,
                "reward_sample": jnp.sum(r_s) / n,
                "reward_greedy": jnp.sum(r_g) / n}


def make_rl_proposal(policy: HyGRLPolicy, cfg: HyGRLConfig):
  """``propose(state, batch, concept_emb, theta)`` -> what the RL update
  of this state and batch will search, for judging on the host:
  ``selected_sample`` / ``selected_greedy`` bool [B, N], the mentor pairs
  ``first`` / ``second`` int32 [B, D, P] with ``asked`` bool [B, D, P]
  (a real pair) and ``in_sequence`` bool [B, D, N] (the state of each
  pair), the offline mentor's ``offline_pref`` and sufficiency rewards
  ``offline_reward_sample`` / ``_greedy`` [B] (fallbacks), ``usable`` [B].
  Jitted."""
  def propose(state: TrainState, batch, concept_emb, theta):
    x = hygrl_inputs(batch, concept_emb, cfg)
    rng = jax.random.fold_in(state.rng, state.step)
    def one(x, k):
      out = _rl_search(state.params, policy, x, theta, k, cfg)
      return out + (_sufficient(x, out[0], cfg), _sufficient(x, out[2], cfg))
    final_s, trace_s, final_g, first, second, pref, r_s, r_g = jax.vmap(one)(
        x, _question_keys(rng, x))
    ok = (trace_s.active & jnp.any(trace_s.frontier, axis=2))[..., None] & (
        first != second)
    return {"selected_sample": final_s.in_sequence,
            "selected_greedy": final_g.in_sequence, "first": first,
            "second": second, "asked": ok & x.usable[:, None, None],
            "in_sequence": trace_s.in_sequence, "offline_pref": pref,
            "offline_reward_sample": r_s, "offline_reward_greedy": r_g,
            "usable": x.usable}
  return jax.jit(propose)


def make_hygrl_step(policy: HyGRLPolicy, optimizer, cfg: HyGRLConfig,
                    stage: str, donate: bool = True, wrap=None):
  """``step(state, batch, concept_emb, theta, external=None)`` ->
  ``(state, metrics)`` for ``stage`` "imitation" or "rl"; one jitted
  program with a NaN guard. ``external``: see :func:`rl_loss`."""
  if stage not in ("imitation", "rl"):
    raise ValueError(f"stage must be imitation or rl, got {stage!r}")

  def step(state: TrainState, batch, concept_emb, theta, external=None):
    x = hygrl_inputs(batch, concept_emb, cfg)
    rng = jax.random.fold_in(state.rng, state.step)
    if stage == "imitation":
      fn = lambda p: imitation_loss(p, policy, x, theta, cfg)
    else:
      fn = lambda p: rl_loss(p, policy, x, theta, rng, cfg, external)
    (loss, metrics), grads = jax.value_and_grad(fn, has_aux=True)(
        state.params)
    new_state, guard = apply_guarded(state, optimizer, loss, grads)
    return new_state, dict(metrics, **guard)

  if wrap is not None:
    step = wrap(step)
  return jax.jit(step, donate_argnums=(0,) if donate else ())


def calibration_batch(batch, concept_emb, cfg: HyGRLConfig):
  """Metrics and labels of the first-step candidates (neighbors of the
  question concepts) of a batch: label = on a shortest path from a question
  concept to the gold answer. Returns ``(metrics [B, N, M], labels [B, N],
  mask [B, N])``, M per :func:`fusion_metrics`."""
  x = hygrl_inputs(batch, concept_emb, cfg)

  def one(x, s, r, em):
    frontier = beam.frontier_of(x.adj, x.seeds, x.node_mask)
    dq = teacher.bfs_distance(s, r, em, x.seeds, x.node_mask)
    total = dq + x.gold_distance
    shortest = jnp.min(jnp.where(x.node_mask, total, teacher.UNREACHABLE))
    label = (total == shortest) & (shortest < teacher.UNREACHABLE)
    return (candidate_metrics(x, x.seeds, frontier, cfg.heuristic_choice),
            label, frontier & x.usable)

  return jax.vmap(one)(x, batch.graphs.senders, batch.graphs.receivers,
                       batch.edge_mask)


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
