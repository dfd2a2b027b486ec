"""HyGRL's training: the imitation loss, SCST with the margin loss, and
the jitted update of each stage.

Imitation = BCE against the fused heuristic's confident labels on the
states of the heuristic's own greedy search; RL = SCST (a sampled and a
greedy search of the same policy through the same code path, reward = the
retrieved subgraph is sufficient) + λ · pairwise margin ranking with the
offline mentor (prefer the candidate closer to the gold answer; ties:
higher fused score). The inputs, scorers and search are in
:mod:`racer_jax.hygrl.search`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from racer_jax.hygrl.search import (
  HyGRLConfig,
  HyGRLInputs,
  _sufficient,
  _trace_logits,
  anchor_of,
  heuristic_prob,
  hygrl_inputs,
  search,
)
from racer_jax.walker import losses
from racer_jax.walker.policy import HyGRLPolicy
from racer_jax.walker.update import TrainState, apply_guarded


def imitation_loss(params, policy, x: HyGRLInputs, theta, cfg: HyGRLConfig):
  """BCE against confident fused-heuristic labels, on the heuristic's own
  greedy search states; returns (loss, metrics)."""
  def one(x):
    final, trace = search(x, cfg, theta=theta)
    logits = _trace_logits(policy, params, x, trace, cfg)
    s = jax.vmap(lambda w, st, f: heuristic_prob(
        theta, x, st, f, cfg.heuristic_choice, anchor_of(cfg, w)))(
            trace.window, trace.in_sequence, trace.frontier)
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
  fused = jax.vmap(lambda w, st, f: heuristic_prob(
      theta, x, st, f, cfg.heuristic_choice, anchor_of(cfg, w)))(
          trace.window, trace.in_sequence, trace.frontier)   # [D, N]
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


def make_rl_proposal(policy: HyGRLPolicy, cfg: HyGRLConfig,
                     inputs_fn=hygrl_inputs):
  """``propose(state, batch, concept_emb, theta)`` -> what the RL update
  of this state and batch will search, for judging on the host:
  ``selected_sample`` / ``selected_greedy`` bool [B, N], the mentor pairs
  ``first`` / ``second`` int32 [B, D, P] with ``asked`` bool [B, D, P]
  (a real pair) and ``in_sequence`` bool [B, D, N] (the state of each
  pair), the offline mentor's ``offline_pref`` and sufficiency rewards
  ``offline_reward_sample`` / ``_greedy`` [B] (fallbacks), ``usable`` [B].
  Jitted."""
  def propose(state: TrainState, batch, concept_emb, theta):
    x = inputs_fn(batch, concept_emb, cfg)
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
                    stage: str, donate: bool = True, wrap=None,
                    inputs_fn=hygrl_inputs, pass_loss: bool = False):
  """``step(state, batch, concept_emb, theta, external=None)`` ->
  ``(state, metrics)`` for ``stage`` "imitation" or "rl"; one jitted
  program with a NaN guard. ``external``: see :func:`rl_loss`.
  ``inputs_fn(batch, table, cfg) -> HyGRLInputs`` (default: ConceptNet
  GraphBatches); ``pass_loss``: the optimizer takes ``value=loss``
  (:func:`stage_optimizer`'s plateau schedule)."""
  if stage not in ("imitation", "rl"):
    raise ValueError(f"stage must be imitation or rl, got {stage!r}")

  def step(state: TrainState, batch, concept_emb, theta, external=None):
    x = inputs_fn(batch, concept_emb, cfg)
    rng = jax.random.fold_in(state.rng, state.step)
    if stage == "imitation":
      fn = lambda p: imitation_loss(p, policy, x, theta, cfg)
    else:
      fn = lambda p: rl_loss(p, policy, x, theta, rng, cfg, external)
    (loss, metrics), grads = jax.value_and_grad(fn, has_aux=True)(
        state.params)
    new_state, guard = apply_guarded(state, optimizer, loss, grads,
                                     pass_loss=pass_loss)
    return new_state, dict(metrics, **guard)

  if wrap is not None:
    step = wrap(step)
  return jax.jit(step, donate_argnums=(0,) if donate else ())


def stage_optimizer(imitation, rl, rl_from_step: int):
  """One optimizer for both stages, as HyGRL trains them: updates before
  ``rl_from_step`` go through ``imitation`` (e.g. AdamW with a plateau
  schedule), later ones through ``rl`` (e.g. Adam); each keeps its own
  state. ``update(..., value=loss)`` passes the loss to the imitation
  chain (``optax.contrib.reduce_on_plateau`` reads it)."""
  imitation = optax.with_extra_args_support(imitation)
  rl = optax.with_extra_args_support(rl)

  def init(params):
    return (imitation.init(params), rl.init(params),
            jnp.zeros((), jnp.int32))

  def update(updates, state, params=None, **extra):
    s_im, s_rl, count = state

    def run_imitation(_):
      u, s = imitation.update(updates, s_im, params, **extra)
      return u, (s, s_rl, count + 1)

    def run_rl(_):
      u, s = rl.update(updates, s_rl, params, **extra)
      return u, (s_im, s, count + 1)

    return jax.lax.cond(count < rl_from_step, run_imitation, run_rl, None)

  return optax.GradientTransformationExtraArgs(init, update)


def plateau_lr_scale(opt_state) -> jax.Array:
  """The current ``reduce_on_plateau`` scale inside a
  :func:`stage_optimizer` state (1.0 when it has none)."""
  for leaf in jax.tree.leaves(
      opt_state[0], is_leaf=lambda s: hasattr(s, "plateau_count")):
    if hasattr(leaf, "scale"):
      return leaf.scale
  return jnp.ones(())
