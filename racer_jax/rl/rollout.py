"""Teacher-guided rollouts: one ``lax.scan`` over hops per walker, ``vmap``
over walkers and questions.

At each step a walker follows the BFS teacher with probability
``p_teacher``; otherwise it samples from the policy at ``temperature``
(or takes the argmax in greedy mode). Log-probabilities are of the policy
itself (temperature 1), which is what the losses differentiate. Each step
uses two uniforms per walker: one for the teacher coin, one for inverse-CDF
sampling; :func:`rollout` draws all of them, [B, W, T, 2], in one call.
"""

from __future__ import annotations

import dataclasses

import flax.struct
import jax
import jax.numpy as jnp

from racer_jax.graph import env, pruning, teacher
from racer_jax.memory import edge_memory
from racer_jax.rl import reward as reward_lib
from racer_jax.rl.policy import MASKED_LOGIT, WalkerPolicy


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
  heuristic_weight: float = 0.0  # fused HyGRL heuristic as a pruning prior
  memory_beta: float = 0.0       # shared-memory reranking: + β·quality(edge)
  sample_hops: int = -1          # multi-path: sample this many hops, then
  #                                greedy (-1: every hop by the mode above)
  teacher_stops: bool = False    # whole-graph walker: the teacher coin
  #                                also forces STOP where no candidate is
  #                                closer (False: the walker samples there)
  score_tables: bool = False     # whole-graph walker: pruning scores from
  #                                per-question tables over all nodes
  #                                (else gathers of the candidates' vectors)


@flax.struct.dataclass
class WalkInputs:
  """One (question, target) pair; a leading batch axis when batched.

  Attributes:
    node_emb: float32 [N, d]; query, target: float32 [d] (unit vectors).
    is_target, node_mask: bool [N].
    neighbors: int32 [N, D]; neighbor_mask: bool [N, D].
    senders, receivers, relation: int32 [E]; edge_mask: bool [E].
    starts: int32 [W] start nodes; start_mask: bool [W].
    prior: float32 [N, D] extra pruning score per neighbor slot (HyGRL's
      fused heuristic; zeros when unused).
    edge_quality: float32 [E] shared-memory quality of each local edge
      (zeros when unused).
  """
  node_emb: jax.Array
  query: jax.Array
  target: jax.Array
  is_target: jax.Array
  node_mask: jax.Array
  neighbors: jax.Array
  neighbor_mask: jax.Array
  senders: jax.Array
  receivers: jax.Array
  relation: jax.Array
  edge_mask: jax.Array
  starts: jax.Array
  start_mask: jax.Array
  prior: jax.Array
  edge_quality: jax.Array


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


@flax.struct.dataclass
class Prepared:
  """Per-question quantities shared by all its walkers (``tables``: the
  policy's :meth:`WalkerPolicy.node_tables`)."""
  graph: env.WalkGraph
  tables: dict
  rewards: reward_lib.RewardTables
  teacher: jax.Array        # int32 [N] teacher action per node
  distance: jax.Array       # int32 [N] hops to the targets
  action_quality: jax.Array  # float32 [N, K] memory quality of each action


def prepare(policy: WalkerPolicy, params, inputs: WalkInputs, rel_emb,
            cfg: RolloutConfig) -> Prepared:
  """Pruning, BFS teacher, reward and policy tables of one question."""
  actions = pruning.prune_actions(
      inputs.neighbors, inputs.neighbor_mask, inputs.receivers,
      inputs.relation, inputs.node_emb, rel_emb, inputs.query, inputs.target,
      k=cfg.top_k, weights=cfg.prune_weights, enabled=cfg.prune,
      prior=inputs.prior if cfg.heuristic_weight else None,
      prior_weight=cfg.heuristic_weight)
  distance = teacher.bfs_distance(inputs.senders, inputs.receivers,
                                  inputs.edge_mask, inputs.is_target,
                                  inputs.node_mask)
  action_node = inputs.receivers[actions.edge]
  teacher_action = teacher.teacher_actions(distance, action_node,
                                           actions.mask, actions.score,
                                           descending=actions.descending)
  tables = policy.apply(params, inputs.node_emb, inputs.query, inputs.target,
                        method=WalkerPolicy.node_tables)
  graph = env.WalkGraph(
      action_edge=actions.edge, action_mask=actions.mask,
      action_node=action_node,
      action_relation=inputs.relation[actions.edge],
      is_target=inputs.is_target & inputs.node_mask)
  action_quality = jnp.where(actions.mask,
                             inputs.edge_quality[actions.edge], 0.0)
  return Prepared(
      graph=graph, tables=tables,
      rewards=reward_lib.reward_tables(inputs.node_emb, rel_emb, inputs.query,
                                       inputs.target, graph.is_target),
      teacher=teacher_action, distance=distance,
      action_quality=action_quality)


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
  :func:`racer_jax.rl.policy.masked_log_softmax`."""
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


def walk(policy: WalkerPolicy, params, prep: Prepared, rel_tables: dict,
         start, uniforms, p_teacher, cfg: RolloutConfig,
         weights: reward_lib.RewardWeights) -> Trajectory:
  """One walker's episode from ``start`` (a scan over ``max_steps``);
  ``rel_tables`` from :func:`relation_tables`; ``uniforms`` float32 [T, 2]
  in [0, 1): per step, the sampling and the teacher-coin draws."""
  graph, tables = prep.graph, {**rel_tables, **prep.tables}
  state = env.reset(graph, start, cfg.max_steps)
  carry = policy.apply(params, tables, start, method=WalkerPolicy.start)

  def body(loop, t):
    state, carry = loop
    node = state.node
    logits = policy.apply(params, tables, carry, graph.action_relation[node],
                          graph.action_node[node], method=WalkerPolicy.logits)
    logits = edge_memory.rerank(logits, prep.action_quality[node],
                                cfg.memory_beta)
    valid = env.valid_actions(graph, state)
    log_probs, probs, cdf = policy_distribution(logits, valid)
    teacher_action = jnp.where(state.done, graph.num_actions - 1,
                               prep.teacher[node])
    forced = (~state.done) & (uniforms[t, 1] < p_teacher)
    action, forced, greedy = select_action(cfg, logits, valid, log_probs, cdf,
                                           uniforms[t, 0], t, teacher_action,
                                           forced)
    next_state, moved, _, relation = env.step(
        graph, state, action, stop_at_target=cfg.stop_at_target)
    r = reward_lib.step_reward(weights, moved, reward_lib.table_transition(
        prep.rewards, relation, node, next_state.node))
    advanced = policy.apply(params, tables, carry, jnp.maximum(relation, 0),
                            next_state.node, method=WalkerPolicy.advance)
    carry = jax.tree.map(lambda a, b: jnp.where(moved, a, b), advanced, carry)
    entropy = -jnp.sum(jnp.where(valid, probs * log_probs, 0.0))
    out = dict(action=action.astype(jnp.int32), log_prob=log_probs[action],
               entropy=entropy, teacher_forced=forced,
               teacher_action=teacher_action.astype(jnp.int32),
               greedy_action=greedy.astype(jnp.int32), active=~state.done,
               reward=r)
    return (next_state, carry), out

  (final, _), out = jax.lax.scan(body, (state, carry),
                                 jnp.arange(cfg.max_steps), unroll=True)
  return Trajectory(
      nodes=final.path_nodes, edges=final.path_edges,
      relations=final.path_relations, reached=final.reached,
      length=final.t, oracle=prep.distance[start] <= cfg.max_steps, **out)


def rollout(policy: WalkerPolicy, params, inputs: WalkInputs, rel_emb, rng,
            p_teacher, cfg: RolloutConfig,
            weights: reward_lib.RewardWeights, uniforms=None) -> Trajectory:
  """All walkers of a batch: ``inputs`` has leading axis B and ``starts``
  [B, W]; returns a :class:`Trajectory` with leading axes [B, W].
  ``uniforms`` float32 [B, W, T, 2] replaces the draws from ``rng``."""
  prep = jax.vmap(lambda x: prepare(policy, params, x, rel_emb, cfg))(inputs)
  rel_tables = relation_tables(policy, params, rel_emb)
  b, w = inputs.starts.shape
  if uniforms is None:
    uniforms = jax.random.uniform(rng, (b, w, cfg.max_steps, 2))
  per_walker = jax.vmap(
      lambda p, s, u: walk(policy, params, p, rel_tables, s, u, p_teacher,
                           cfg, weights),
      in_axes=(None, 0, 0))
  return jax.vmap(per_walker)(prep, inputs.starts, uniforms)


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


def multipath(policy: WalkerPolicy, params, inputs: WalkInputs, rel_emb,
              rng, cfg: RolloutConfig, weights: reward_lib.RewardWeights,
              uniforms=None):
  """RACER's multi-path generation: every walker samples (at
  ``cfg.temperature``) for the first ``cfg.sample_hops`` hops (default: half
  of them) and is greedy after, with no teacher.

  Returns:
    ``(trajectory [B, W, ...], distinct bool [B, W], path_log_prob [B, W])``;
    ``distinct`` masks invalid walkers and repeated paths.
  """
  hops = cfg.sample_hops if cfg.sample_hops >= 0 else cfg.max_steps // 2
  cfg = dataclasses.replace(cfg, greedy=False, sample_hops=hops)
  traj = rollout(policy, params, inputs, rel_emb, rng, 0.0, cfg, weights,
                 uniforms)
  distinct = jax.vmap(distinct_paths)(traj.nodes, traj.edges,
                                      inputs.start_mask)
  log_prob = jnp.sum(jnp.where(traj.active, traj.log_prob, 0.0), axis=-1)
  return traj, distinct, log_prob
