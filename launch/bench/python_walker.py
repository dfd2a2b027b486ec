"""Plain-Python/NumPy reference of one walker episode on one question.

A second opinion on :mod:`racer_jax.rl.rollout` (tests replay the JAX
walkers' actions here and compare every field) and the "Python loop over
episodes, NumPy forward pass" baseline of the speed benchmark. Nothing is
vectorized over walkers or questions and nothing uses JAX: pruning and the
teacher are loops over nodes, the BFS is a queue, the environment is a few
``if``s and the policy is NumPy matrix products with the same float32
parameters (a params pytree after ``jax.device_get``).

Top-k orders equal scores by lower index first (scores of ``-0.0`` are
made ``+0.0`` first, as :mod:`racer_jax.graph.pruning` does), and ``reset``
ends a walk that starts on a target whatever ``stop_at_target`` says, as
:func:`racer_jax.graph.env.reset` does.

The recurrent cell is flax's ``GRUCell`` or ``OptimizedLSTMCell``, whichever
the params hold. Typical use: ``prep = prepare(params, row, rel_emb, cfg)``
once per question, then :func:`reference_walk` per walker with ``prep``.
"""

from __future__ import annotations

import collections
import collections.abc

import numpy as np

from racer_jax.graph.teacher import UNREACHABLE
from racer_jax.rl.policy import GATES, MASKED_LOGIT
from racer_jax.rl.reward import RewardWeights
from racer_jax.rl.rollout import RolloutConfig

F32 = np.float32


# -- pruning and teacher ------------------------------------------------------
def edge_scores(neighbors, neighbor_mask, receivers, relation, node_emb,
                rel_emb, query, target, weights):
  """float32 [N, D] semantic scores, ``-inf`` on masked slots (see
  :func:`racer_jax.graph.pruning.edge_scores`)."""
  w_rel, w_query, w_target = weights
  rel_sim, node_q, node_t = rel_emb @ query, node_emb @ query, node_emb @ target
  score = np.full(neighbors.shape, -np.inf, F32)
  for u in range(neighbors.shape[0]):
    for j in range(neighbors.shape[1]):
      if neighbor_mask[u, j]:
        e = neighbors[u, j]
        v = receivers[e]
        score[u, j] = (w_rel * rel_sim[relation[e]] + w_query * node_q[v] +
                       w_target * node_t[v]) + F32(0.0)  # -0.0 -> +0.0
  return score


def prune_actions(neighbors, neighbor_mask, receivers, relation, node_emb,
                  rel_emb, query, target, *, k: int, weights,
                  enabled: bool = True):
  """Each node's top-``k`` slots (all D in table order when disabled).

  Returns:
    dict of ``edge`` int32 [N, K], ``mask`` bool [N, K], ``score`` float32
    [N, K] with ``K = k`` (or D when disabled or ``k >= D``).
  """
  score = edge_scores(neighbors, neighbor_mask, receivers, relation, node_emb,
                      rel_emb, query, target, weights)
  n, d = neighbors.shape
  if not enabled or k >= d:
    return {"edge": np.where(neighbor_mask, neighbors, 0).astype(np.int32),
            "mask": neighbor_mask.astype(bool), "score": score}
  edge = np.zeros((n, k), np.int32)
  mask = np.zeros((n, k), bool)
  top = np.full((n, k), -np.inf, F32)
  for u in range(n):
    order = sorted(range(d), key=lambda j: -score[u, j])  # stable: by index
    for i, j in enumerate(order[:k]):
      if neighbor_mask[u, j] and score[u, j] > -np.inf:
        edge[u, i], mask[u, i], top[u, i] = neighbors[u, j], True, score[u, j]
  return {"edge": edge, "mask": mask, "score": top}


def bfs_distance(senders, receivers, edge_mask, is_target, node_mask):
  """int32 [N] hops to the nearest target along edge direction: one
  breadth-first search from all targets over the reversed unmasked edges;
  :data:`UNREACHABLE` where no target can be reached."""
  n = is_target.shape[0]
  into = [[] for _ in range(n)]          # into[v]: senders of edges u -> v
  for e in range(senders.shape[0]):
    if edge_mask[e]:
      into[receivers[e]].append(senders[e])
  dist = np.full(n, UNREACHABLE, np.int32)
  queue = collections.deque()
  for v in range(n):
    if is_target[v] and node_mask[v]:
      dist[v] = 0
      queue.append(v)
  while queue:
    v = queue.popleft()
    for u in into[v]:
      if dist[u] == UNREACHABLE:
        dist[u] = dist[v] + 1
        queue.append(u)
  return dist


def teacher_actions(dist, action_edge, action_mask, action_score, receivers):
  """int32 [N]: per node the highest-scoring action (first among equals)
  that leads one hop closer to a target; STOP (``K``) if there is none."""
  n, k = action_edge.shape
  out = np.full(n, k, np.int32)
  for u in range(n):
    if dist[u] >= UNREACHABLE:
      continue
    best = -np.inf
    for j in range(k):
      closer = (action_mask[u, j] and
                dist[receivers[action_edge[u, j]]] == dist[u] - 1)
      if closer and (out[u] == k or action_score[u, j] > best):
        out[u], best = j, action_score[u, j]
  return out


# -- policy (WalkerPolicy in NumPy) --------------------------------------------
def _sigmoid(x):
  return F32(1) / (F32(1) + np.exp(-x))


def _dense(p, x):
  y = x @ p["kernel"]
  return y + p["bias"] if "bias" in p else y


def _unwrap(params):
  return params["params"] if "params" in params else params


def recurrent_kind(params) -> str:
  """``"gru"`` or ``"lstm"``, read from the cell's parameter names."""
  return "gru" if "ir" in _unwrap(params)["cell"] else "lstm"


def policy_tables(params, node_emb, rel_emb, query, target):
  """:meth:`WalkerPolicy.prepare`: dict of [N, H] / [R2, H] tables."""
  p = _unwrap(params)
  ctx = (_dense(p["node_ctx"], node_emb) +
         _dense(p["query_ctx"], query)[None] +
         _dense(p["target_ctx"], target)[None])
  return {"ctx": ctx, "act_rel": _dense(p["action_rel"], rel_emb),
          "act_node": _dense(p["action_node"], node_emb),
          "hist_rel": _dense(p["history_rel"], rel_emb),
          "hist_node": _dense(p["history_node"], node_emb)}


def layout_tables(params, node_emb, rel_emb, query, target) -> dict:
  """The tables of :meth:`WalkerPolicy.prepare` in its own layout (the JAX
  policy arranges the same linear maps for batched walkers): ``node_emb``,
  ``context`` [H], ``act_node_t`` [H, N], ``act_rel_t`` [H, R2 + 1] (STOP's
  vector last) and ``cell_rel`` [R2, G*H] (the cell's input projection of
  ``hist_rel``, biases included)."""
  p, t = _unwrap(params), policy_tables(params, node_emb, rel_emb, query,
                                        target)
  c, gates = p["cell"], GATES[recurrent_kind(params)]
  return {"node_emb": node_emb,
          "context": (_dense(p["query_ctx"], query) +
                      _dense(p["target_ctx"], target) + p["node_ctx"]["bias"]),
          "act_node_t": t["act_node"].T,
          "act_rel_t": np.concatenate([t["act_rel"], p["stop"][None]]).T,
          "cell_rel": np.concatenate([_dense(c["i" + g], t["hist_rel"])
                                      for g in gates], axis=-1)}


def cell(params, carry, x):
  """flax ``GRUCell`` (carry h [H]) or ``OptimizedLSTMCell`` (carry (c, h))."""
  c = _unwrap(params)["cell"]
  if "ir" in c:  # GRU
    h = carry
    r = _sigmoid(_dense(c["ir"], x) + _dense(c["hr"], h))
    z = _sigmoid(_dense(c["iz"], x) + _dense(c["hz"], h))
    n = np.tanh(_dense(c["in"], x) + r * _dense(c["hn"], h))
    return (F32(1) - z) * n + z * h
  cc, h = carry  # LSTM: gates i, f, g, o; the h-side denses carry the bias
  gate = lambda name: _dense(c["h" + name], h) + _dense(c["i" + name], x)
  i, f, o = _sigmoid(gate("i")), _sigmoid(gate("f")), _sigmoid(gate("o"))
  new_c = f * cc + i * np.tanh(gate("g"))
  return new_c, o * np.tanh(new_c)


def policy_start(params, tables, node):
  """Carry after reading the start node."""
  zeros = np.zeros(tables["ctx"].shape[1], F32)
  carry = zeros if recurrent_kind(params) == "gru" else (zeros, zeros)
  return cell(params, carry, tables["hist_node"][node])


def policy_advance(params, tables, carry, relation, node):
  return cell(params, carry,
              tables["hist_rel"][relation] + tables["hist_node"][node])


def policy_logits(params, tables, carry, node, action_relation, action_node):
  """float32 [K + 1] unmasked logits (K actions, then STOP)."""
  p = _unwrap(params)
  h = carry if recurrent_kind(params) == "gru" else carry[1]
  s = np.tanh(tables["ctx"][node] + _dense(p["state_history"], h))
  s = np.tanh(_dense(p["state_out"], s))
  actions = tables["act_rel"][action_relation] + tables["act_node"][action_node]
  stop = np.dot(p["stop"], s) + p["stop_bias"]
  return np.concatenate([actions @ s, [stop]]).astype(F32)


def masked_log_softmax(logits, mask):
  x = np.where(mask, logits, F32(MASKED_LOGIT)).astype(F32)
  shifted = x - x.max()
  return shifted - np.log(np.sum(np.exp(shifted)))


# -- one question, one walker -------------------------------------------------
def prepare(params, inputs_row, rel_emb, cfg: RolloutConfig) -> dict:
  """Pruned actions, BFS distance, teacher, policy and reward tables of one
  question (``inputs_row``: a ``WalkInputs`` of NumPy arrays, no batch axis)."""
  x = inputs_row
  params, rel_emb = _as_numpy(params), np.asarray(rel_emb)
  acts = prune_actions(x.neighbors, x.neighbor_mask, x.receivers, x.relation,
                       x.node_emb, rel_emb, x.query, x.target, k=cfg.top_k,
                       weights=cfg.prune_weights, enabled=cfg.prune)
  dist = bfs_distance(x.senders, x.receivers, x.edge_mask, x.is_target,
                      x.node_mask)
  return {
      "params": params, "actions": acts, "distance": dist,
      "teacher": teacher_actions(dist, acts["edge"], acts["mask"],
                                 acts["score"], x.receivers),
      "tables": policy_tables(params, x.node_emb, rel_emb, x.query, x.target),
      "is_target": x.is_target & x.node_mask,
      "rel_query": rel_emb @ x.query, "node_target": x.node_emb @ x.target,
      "receivers": x.receivers, "relation": x.relation}


def _as_numpy(tree):
  if isinstance(tree, collections.abc.Mapping):
    return {k: _as_numpy(v) for k, v in tree.items()}
  return np.asarray(tree)


STEP_DTYPES = {"action": np.int32, "log_prob": F32, "entropy": F32,
               "teacher_forced": bool, "teacher_action": np.int32,
               "greedy_action": np.int32, "active": bool, "reward": F32}


def record_step(out, action, log_probs, valid, teacher_forced, teacher_action,
                greedy_action, active, reward):
  """Appends one step's Trajectory fields to `out` (name -> list).

  log_probs, valid: [K + 1] over the K actions and STOP; the entropy counts the
  valid ones only, as rl.rollout does.
  """
  probs = np.exp(log_probs)
  for name, value in (
      ("action", action), ("log_prob", log_probs[action]),
      ("entropy", -np.sum(np.where(valid, probs * log_probs, F32(0)))),
      ("teacher_forced", teacher_forced), ("teacher_action", teacher_action),
      ("greedy_action", greedy_action), ("active", active), ("reward", reward)):
    out[name].append(value)


def stack_steps(out) -> dict:
  """The lists of `record_step` as [T] arrays of the Trajectory's dtypes."""
  return {name: np.asarray(out[name], dtype)
          for name, dtype in STEP_DTYPES.items()}


def reference_walk(params, inputs_row, rel_emb, start, actions=None, rng=None,
                   p_teacher=0.0, cfg: RolloutConfig = RolloutConfig(),
                   weights: RewardWeights = RewardWeights(), *, forced=None,
                   prep=None) -> dict:
  """One walker's episode from ``start``, as :func:`rollout.walk`.

  Args:
    params: flax params (NumPy leaves); inputs_row: one question's
      ``WalkInputs`` (NumPy, no batch axis); rel_emb: float32 [R2, d].
    actions: int [T] to replay; if None the walker chooses (argmax when
      ``cfg.greedy``, else the teacher with probability ``p_teacher`` and
      otherwise a sample at ``cfg.temperature`` drawn with NumPy ``rng``).
    forced: bool [T] teacher-forced flags to report when replaying.
    prep: :func:`prepare` of this question, to share it between walkers.

  Returns:
    dict with the fields of ``rollout.Trajectory`` as NumPy arrays.
  """
  prep = prepare(params, inputs_row, rel_emb, cfg) if prep is None else prep
  params, tables, acts = prep["params"], prep["tables"], prep["actions"]
  if actions is None and not cfg.greedy:
    rng = np.random.default_rng(rng)  # a Generator is returned as it is
  steps, k = cfg.max_steps, acts["edge"].shape[1]
  receivers, relation = prep["receivers"], prep["relation"]
  node, t = int(start), 0
  done = reached = bool(prep["is_target"][node])   # env.reset
  nodes = np.full(steps + 1, node, np.int32)
  edges = np.full(steps, -1, np.int32)
  relations = np.full(steps, -1, np.int32)
  carry = policy_start(params, tables, node)
  out = collections.defaultdict(list)
  for step in range(steps):
    valid = np.append(acts["mask"][node] & (not done), True)
    action_edge = acts["edge"][node]
    logits = policy_logits(params, tables, carry, node,
                           relation[action_edge], receivers[action_edge])
    log_probs = masked_log_softmax(logits, valid)
    greedy = int(np.argmax(log_probs))
    teacher = k if done else int(prep["teacher"][node])
    is_forced = False
    if actions is not None:
      action = int(actions[step])
      is_forced = bool(forced[step]) if forced is not None else False
    elif cfg.greedy:
      action = greedy
    elif not done and rng.random() < p_teacher:
      action, is_forced = teacher, True
    else:
      z = np.where(valid, logits / cfg.temperature, MASKED_LOGIT)
      prob = np.exp(z - z.max())
      action = int(rng.choice(k + 1, p=prob / prob.sum()))
    # env.step: a STOP, a masked action or a finished walk does not move.
    moved = not done and action < k and bool(acts["mask"][node, action])
    reward = F32(0)
    if moved:
      e = int(action_edge[action])
      nxt, rel = int(receivers[e]), int(relation[e])
      edges[t], relations[t], nodes[t + 1:] = e, rel, nxt
      t += 1
      reached = reached or bool(prep["is_target"][nxt])
      reward = (-weights.step + weights.relation * prep["rel_query"][rel] +
                weights.goal * (prep["node_target"][nxt] -
                                prep["node_target"][node]) +
                weights.reach * F32(prep["is_target"][nxt]))
      carry = policy_advance(params, tables, carry, rel, nxt)
    record_step(out, action, log_probs, valid, is_forced, teacher, greedy,
                not done, reward)
    if moved:
      node = nxt
    done = (done or not moved or t >= steps or
            (cfg.stop_at_target and reached))
  result = stack_steps(out)
  result.update(
      nodes=nodes, edges=edges, relations=relations, reached=np.bool_(reached),
      length=np.int32(t),
      oracle=np.bool_(prep["distance"][int(start)] <= steps))
  return result
