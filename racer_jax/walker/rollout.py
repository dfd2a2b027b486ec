"""RACER's GraphAgent walking the whole knowledge graph: teacher-guided
rollouts, one ``lax.scan`` over hops per walker, ``vmap`` over walkers and
questions.

At each step a walker at node ``u`` reads ``u``'s ≤ B candidates from the
capped CSR, masks the concepts it already stood on, scores the rest
semantically and keeps the top K (:mod:`racer_jax.walker.whole_graph`); the
policy scores those K + STOP. The walker follows the BFS teacher with
probability ``p_teacher`` (distances from one backward frontier relaxation
per (question, target) over the whole capped graph); otherwise it samples
from the policy at ``temperature`` (or takes the argmax in greedy mode).
Log-probabilities are of the policy itself (temperature 1), which is what
the losses differentiate. Each step uses two uniforms per walker: one for
the teacher coin, one for inverse-CDF sampling; :func:`rollout` draws all
of them, [B, W, T, 2], in one call. ``edges`` hold global edge ids (the
shared memory's index) and ``nodes`` global concept ids.
"""

from __future__ import annotations

import dataclasses

import flax.struct
import jax
import jax.numpy as jnp

from racer_jax.walker import whole_graph as wg
from racer_jax.memory import edge_memory
from racer_jax.walker import reward as reward_lib
from racer_jax.walker.policy import MASKED_LOGIT, WalkerPolicy


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
  """Static rollout settings (hashable: part of the compiled program)."""
  max_steps: int = 3
  top_k: int = 16
  prune: bool = True
  prune_weights: tuple[float, float, float] = (1.0, 1.0, 1.0)
  stop_at_target: bool = True
  temperature: float = 1.0
  greedy: bool = False
  memory_beta: float = 0.0       # shared-memory reranking: + β·quality(edge)
  sample_hops: int = -1          # multi-path: sample this many hops, then
  #                                greedy (-1: every hop by the mode above)
  teacher_stops: bool = False    # the teacher coin
  #                                also forces STOP where no candidate is
  #                                closer (False: the walker samples there)
  score_tables: bool = False     # pruning scores from
  #                                per-question tables over all nodes
  #                                (else gathers of the candidates' vectors)


@flax.struct.dataclass
class Trajectory:
  """One walker's episode (leading [B, W] axes when batched); T steps.

  Attributes:
    action: int32 [T] in ``[0, K]`` (K = STOP).
    log_prob: float32 [T] policy log-probability of ``action``.
    entropy: float32 [T] policy entropy over valid actions.
    teacher_forced: bool [T]; teacher_action, greedy_action: int32 [T].
    active: bool [T] the walker acted at t (its walk was not over).
    reward: float32 [T].
    nodes: int32 [T + 1]; edges, relations: int32 [T] (-1: no move).
    reached: bool []; length: int32 [] moves made.
    oracle: bool [] a target lies within ``max_steps`` hops of the start.
  """
  action: jax.Array
  log_prob: jax.Array
  entropy: jax.Array
  teacher_forced: jax.Array
  teacher_action: jax.Array
  greedy_action: jax.Array
  active: jax.Array
  reward: jax.Array
  nodes: jax.Array
  edges: jax.Array
  relations: jax.Array
  reached: jax.Array
  length: jax.Array
  oracle: jax.Array


def cumulative(weights):
  """Running sums of ``weights`` [K] (the last is the total).

  A product with an upper-triangular matrix of ones: batched over walkers
  that is one small matmul, where ``jnp.cumsum`` lowers to a quadratic
  ``reduce-window`` on CPU (about 5% of a rollout at 4096 walkers).
  ``HIGHEST`` keeps it float32 on accelerators with TF32.
  """
  k = weights.shape[-1]
  return jnp.matmul(weights, jnp.triu(jnp.ones((k, k), weights.dtype)),
                    precision=jax.lax.Precision.HIGHEST)


def inverse_cdf(cdf, u):
  """The index i with ``cdf[i-1] <= u * cdf[-1] < cdf[i]`` for one uniform
  ``u`` in [0, 1): a sample with probability proportional to the weights
  whose running sums are ``cdf`` (cheaper than Gumbel-max: one random
  number per walker and step instead of one per action)."""
  index = jnp.sum(cdf <= u * cdf[-1])
  return jnp.minimum(index, cdf.shape[-1] - 1).astype(jnp.int32)


def sample_categorical(probs, u):
  """Inverse-CDF sample of index i with probability ``probs[i]`` from one
  uniform ``u`` in [0, 1)."""
  return inverse_cdf(cumulative(probs), u)


def policy_distribution(logits, valid):
  """``(log_probs, probs, cdf)`` [K + 1] of the policy over ``valid``
  actions, with one ``exp`` and no reduction for the normalizer: the
  running sums of ``exp(logit - max)`` give both the sampling CDF and, as
  their last entry, the softmax denominator (a 17-wide row sum is slower on
  CPU than the small matmul that makes the CDF anyway). Masked actions get
  log-probability about -1e9 and probability exactly 0, as
  :func:`racer_jax.walker.policy.masked_log_softmax`."""
  z = jnp.where(valid, logits, MASKED_LOGIT)
  shifted = z - jax.lax.stop_gradient(jnp.max(z))
  weights = jnp.exp(shifted)
  cdf = cumulative(weights)
  log_probs = shifted - jnp.log(cdf[-1])
  return log_probs, weights / cdf[-1], cdf


def first_argmax(x):
  """``argmax`` as max + smallest matching index (faster on CPU than the
  variadic reduction ``jnp.argmax`` lowers to)."""
  hit = x == jnp.max(x)
  return jnp.min(jnp.where(hit, jnp.arange(x.shape[-1]), x.shape[-1]))


def relation_tables(policy: WalkerPolicy, params, rel_emb) -> dict:
  """The policy's question-independent tables (once per batch)."""
  return policy.apply(params, rel_emb, method=WalkerPolicy.relation_tables)


def select_action(cfg: RolloutConfig, logits, valid, log_probs, cdf,
                  u_sample, t, teacher_action, forced):
  """One step's action [] in ``[0, K]`` of the rollout mode of ``cfg``:
  greedy (evaluation), sample then greedy (multi-path: the first
  ``cfg.sample_hops`` hops sampled), or the teacher's where ``forced``
  (bool []) else a sample at ``cfg.temperature`` (``u_sample`` in [0, 1)).
  Returns ``(action, forced, greedy)``; ``forced`` is False outside
  teacher-guided training."""
  if cfg.temperature == 1.0:
    sampled = inverse_cdf(jax.lax.stop_gradient(cdf), u_sample)
  else:
    sampled = sample_categorical(jax.nn.softmax(jnp.where(
        valid, jax.lax.stop_gradient(logits) / cfg.temperature,
        MASKED_LOGIT)), u_sample)
  greedy = first_argmax(log_probs)
  if cfg.greedy:
    return greedy, jnp.zeros_like(forced), greedy
  if cfg.sample_hops >= 0:  # multi-path: sample, then greedy; no teacher
    return (jnp.where(t < cfg.sample_hops, sampled, greedy),
            jnp.zeros_like(forced), greedy)
  return jnp.where(forced, teacher_action, sampled), forced, greedy


def distinct_paths(nodes, edges, valid):
  """bool [W]: the first occurrence of every distinct walk of one question
  (same start node and same edge sequence = the same path).

  Args:
    nodes: int32 [W, T + 1]; edges: int32 [W, T]; valid: bool [W].
  """
  same = (jnp.all(edges[:, None] == edges[None], axis=-1) &
          (nodes[:, None, 0] == nodes[None, :, 0]))
  earlier = jnp.tril(jnp.ones(same.shape, bool), k=-1)
  dup = jnp.any(same & earlier & valid[None, :], axis=1)
  return valid & ~dup


@flax.struct.dataclass
class GoalInputs:
  """One (question, target) pair; a leading batch axis when batched.

  Attributes:
    query, target: float32 [d] unit vectors (the question; the mean of the
      target's concept vectors).
    target_concepts: int32 [A] the target's concept ids, -1 padding.
    starts: int32 [W] start concepts; start_mask: bool [W].
  """
  query: jax.Array
  target: jax.Array
  target_concepts: jax.Array
  starts: jax.Array
  start_mask: jax.Array


@flax.struct.dataclass
class GoalTables:
  """Per-(question, target) quantities all its walkers share."""
  distance: jax.Array    # int8 [V] hops to the target (BFS teacher)
  context: jax.Array     # float32 [H] the policy's goal context
  rel_query: jax.Array   # float32 [R2] sim(relation, query)
  node_score: jax.Array  # float32 [V] pruning's node term (score_tables),
  #                        else [0]


def prepare(policy: WalkerPolicy, params, graph: wg.WholeGraph,
            inputs: GoalInputs, rel_emb, cfg: RolloutConfig, *,
            teacher: bool = True, distance_batch: int = 8) -> GoalTables:
  """The goal tables of a batch (``inputs`` [B, ...]). The BFS distances
  run ``distance_batch`` questions at a time (``lax.map``): each holds
  [Ec] transients. ``teacher=False`` (inference without a teacher)
  skips them: every node counts as out of reach."""
  b, v = inputs.query.shape[0], graph.num_nodes
  if teacher:
    distance = jax.lax.map(
        lambda t: wg.reach_distance(graph, t, cfg.max_steps),
        inputs.target_concepts, batch_size=min(b, distance_batch))
  else:
    distance = jnp.full((b, v), wg.UNREACHABLE, jnp.int8)
  context = jax.vmap(lambda q, t: policy.apply(
      params, q, t, method=WalkerPolicy.goal_context))(inputs.query,
                                                       inputs.target)
  if cfg.score_tables and cfg.prune:
    _, w_query, w_target = cfg.prune_weights
    mix = w_query * inputs.query + w_target * inputs.target       # [B, d]
    node_score = mix @ graph.node_emb.T                           # [B, V]
  else:
    node_score = jnp.zeros((b, 0), jnp.float32)
  return GoalTables(distance=distance, context=context,
                    rel_query=inputs.query @ rel_emb.T,
                    node_score=node_score)


def actions_at(graph: wg.WholeGraph, goal: GoalTables, inputs: GoalInputs,
               node, visited, cfg: RolloutConfig) -> wg.Candidates:
  """The walker's action slots at ``node``: K pruned candidates, or all B
  with pruning off (in importance order)."""
  cands = wg.candidates(graph, node, visited)
  cands = wg.score_candidates(
      graph, cands, goal.rel_query, inputs.query, inputs.target,
      cfg.prune_weights,
      goal.node_score if goal.node_score.shape[-1] else None)
  if cfg.prune:
    cands = wg.prune(cands, cfg.top_k)
  return wg.with_vectors(graph, cands)


def walk(policy: WalkerPolicy, params, graph: wg.WholeGraph,
         goal: GoalTables, inputs: GoalInputs, rel_tables: dict, start,
         uniforms, p_teacher, cfg: RolloutConfig,
         weights: reward_lib.RewardWeights, edge_quality=None) -> Trajectory:
  """One walker's episode from ``start`` (a scan over ``max_steps``).

  Args:
    uniforms: float32 [T, 2] in [0, 1): per step, sampling and teacher coin.
    edge_quality: optional float32 [E2] shared-memory quality per global
      edge id (reranks actions by ``cfg.memory_beta``).
  """
  t_max = cfg.max_steps
  tables = {**rel_tables, "node_emb": graph.node_emb,
            "context": goal.context}
  targets = inputs.target_concepts
  is_target = lambda n: jnp.any((n == targets) & (targets >= 0))
  start = jnp.asarray(start, jnp.int32)
  on_target = is_target(start)
  carry = policy.apply(params, tables, start, method=WalkerPolicy.start)
  descending = cfg.prune and cfg.top_k < graph.bandwidth
  state = dict(node=start, t=jnp.int32(0), done=on_target, reached=on_target,
               sim=graph.node_emb[start] @ inputs.target,
               nodes=jnp.full((t_max + 1,), start, jnp.int32),
               edges=jnp.full((t_max,), -1, jnp.int32),
               relations=jnp.full((t_max,), -1, jnp.int32))

  def body(loop, t):
    state, carry = loop
    node, done = state["node"], state["done"]
    acts = actions_at(graph, goal, inputs, node, state["nodes"], cfg)
    acts = acts.replace(mask=acts.mask & ~done)
    k = acts.mask.shape[0]
    logits = policy.apply(params, tables, carry, acts.rel, acts.emb,
                          method=WalkerPolicy.candidate_logits)
    if edge_quality is not None and cfg.memory_beta:
      logits = edge_memory.rerank(
          logits, jnp.where(acts.mask, edge_quality[acts.edge_id], 0.0),
          cfg.memory_beta)
    valid = jnp.concatenate([acts.mask, jnp.ones((1,), bool)])
    log_probs, probs, cdf = policy_distribution(logits, valid)
    teacher = jnp.where(done, k, wg.teacher_action(acts, goal.distance, node,
                                                   descending))
    forced = (~done) & (uniforms[t, 1] < p_teacher)
    if not cfg.teacher_stops:  # no closer candidate: no teacher action
      forced = forced & (teacher < k)
    action, forced, greedy = select_action(cfg, logits, valid, log_probs, cdf,
                                           uniforms[t, 0], t, teacher, forced)
    hit = jnp.arange(k) == action
    moved = (~done) & jnp.any(hit & acts.mask)
    chosen = acts.take(jnp.minimum(action, k - 1))
    nxt = jnp.where(moved, chosen.dst, node)
    edge = jnp.where(moved, chosen.edge_id, -1)
    relation = jnp.where(moved, chosen.rel, -1)
    sim_next = jnp.where(moved, chosen.emb @ inputs.target, state["sim"])
    arrived = moved & is_target(nxt)
    r = reward_lib.step_reward(weights, moved, reward_lib.Transition(
        relation_query=goal.rel_query[jnp.maximum(relation, 0)],
        target_before=state["sim"], target_after=sim_next, arrived=arrived))
    t_next = state["t"] + moved.astype(jnp.int32)
    reached = state["reached"] | arrived
    done_next = done | ~moved | (t_next >= t_max)
    if cfg.stop_at_target:
      done_next = done_next | reached
    slot = moved & (jnp.arange(t_max) == state["t"])
    new_state = dict(
        node=nxt, t=t_next, done=done_next, reached=reached, sim=sim_next,
        nodes=jnp.where(moved & (jnp.arange(t_max + 1) > state["t"]), nxt,
                        state["nodes"]),
        edges=jnp.where(slot, edge, state["edges"]),
        relations=jnp.where(slot, relation, state["relations"]))
    advanced = policy.apply(params, tables, carry, jnp.maximum(relation, 0),
                            nxt, method=WalkerPolicy.advance)
    carry = jax.tree.map(lambda a, b: jnp.where(moved, a, b), advanced, carry)
    entropy = -jnp.sum(jnp.where(valid, probs * log_probs, 0.0))
    out = dict(action=action.astype(jnp.int32), log_prob=log_probs[action],
               entropy=entropy, teacher_forced=forced,
               teacher_action=teacher.astype(jnp.int32),
               greedy_action=greedy.astype(jnp.int32), active=~done,
               reward=r)
    return (new_state, carry), out

  (final, _), out = jax.lax.scan(body, (state, carry), jnp.arange(t_max))
  return Trajectory(
      nodes=final["nodes"], edges=final["edges"],
      relations=final["relations"], reached=final["reached"],
      length=final["t"],
      oracle=goal.distance[start].astype(jnp.int32) <= t_max, **out)


def rollout(policy: WalkerPolicy, params, graph: wg.WholeGraph,
            inputs: GoalInputs, rel_emb, rng, p_teacher, cfg: RolloutConfig,
            weights: reward_lib.RewardWeights,
            edge_quality=None, uniforms=None,
            teacher: bool = True, goals: GoalTables | None = None
            ) -> Trajectory:
  """All walkers of a batch: ``inputs`` has leading axis B and ``starts``
  [B, W]; returns a :class:`Trajectory` with leading axes [B, W].
  ``uniforms`` float32 [B, W, T, 2] replaces the draws from ``rng`` (the
  baselines' parity tests pass the same to both); ``teacher=False``
  leaves out the BFS teacher (pure inference: teacher actions STOP,
  ``oracle`` False), which needs ``p_teacher = 0``. ``goals`` passes
  tables already made by :func:`prepare` for these inputs."""
  if goals is None:
    goals = prepare(policy, params, graph, inputs, rel_emb, cfg,
                    teacher=teacher)
  rel_tables = relation_tables(policy, params, rel_emb)
  b, w = inputs.starts.shape
  if uniforms is None:
    uniforms = jax.random.uniform(rng, (b, w, cfg.max_steps, 2))
  per_walker = jax.vmap(
      lambda g, x, s, u: walk(policy, params, graph, g, x, rel_tables, s, u,
                              p_teacher, cfg, weights, edge_quality),
      in_axes=(None, None, 0, 0))
  return jax.vmap(per_walker)(goals, inputs, inputs.starts, uniforms)


def multipath(policy: WalkerPolicy, params, graph: wg.WholeGraph,
              inputs: GoalInputs, rel_emb, rng, cfg: RolloutConfig,
              weights: reward_lib.RewardWeights, edge_quality=None,
              uniforms=None):
  """RACER's multi-path generation: sample (at
  ``cfg.temperature``) the first ``cfg.sample_hops`` hops (default half),
  then greedy, no teacher. Returns ``(trajectory [B, W, ...], distinct
  bool [B, W], path_log_prob [B, W])``; ``uniforms`` [B, W, T, 2]: the
  draws (see :func:`rollout`)."""
  hops = cfg.sample_hops if cfg.sample_hops >= 0 else cfg.max_steps // 2
  cfg = dataclasses.replace(cfg, greedy=False, sample_hops=hops)
  traj = rollout(policy, params, graph, inputs, rel_emb, rng, 0.0, cfg,
                 weights, edge_quality, uniforms)
  distinct = jax.vmap(distinct_paths)(traj.nodes, traj.edges,
                                      inputs.start_mask)
  log_prob = jnp.sum(jnp.where(traj.active, traj.log_prob, 0.0), axis=-1)
  return traj, distinct, log_prob
