"""Plain-Python reference of one whole-graph walker episode.

A second opinion on :mod:`racer_jax.walker.rollout`, read straight off the
store (``indptr`` and the ``importance`` order, not the device's capped
table): the candidates of a node are its first ``B`` edges in importance
order; those leading to a concept the walk already visited are dropped;
the rest are scored one by one and sorted (score descending, slot
ascending) and the first K kept; the BFS teacher's distances come from a
queue-based breadth-first search backwards from the target over the
capped graph; the policy is ``launch/bench/python_walker.py``'s NumPy
``WalkerPolicy``. Tests replay the JAX walkers' actions here and compare
every field.
"""

from __future__ import annotations

import collections.abc

import numpy as np

from racer_jax.walker.policy import MASKED_LOGIT
from racer_jax.walker.reward import RewardWeights
from racer_jax.walker.rollout import RolloutConfig

F32 = np.float32
UNREACHABLE = 127


# The policy in plain Python (racer_jax/walker/policy.py's math, one walker).

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


def capped_edges(kg, node: int, bandwidth: int) -> list[int]:
  """CSR positions of ``node``'s first ``bandwidth`` edges by importance."""
  lo, hi = int(kg.indptr[node]), int(kg.indptr[node + 1])
  return [int(p) for p in kg.importance[lo:hi][:bandwidth]]


def bfs_distance(kg, targets, bandwidth: int, max_hops: int) -> dict:
  """{node: hops to the nearest target} within ``max_hops`` over the capped
  graph (a queue over reversed capped edges)."""
  reverse = collections.defaultdict(list)
  for u in range(kg.num_concepts):
    for p in capped_edges(kg, u, bandwidth):
      reverse[int(kg.dst[p])].append(u)
  dist = {int(t): 0 for t in targets if t >= 0}
  queue = collections.deque(dist)
  while queue:
    v = queue.popleft()
    if dist[v] == max_hops:
      continue
    for u in reverse[v]:
      if u not in dist:
        dist[u] = dist[v] + 1
        queue.append(u)
  return dist


def actions_at(kg, node, visited, emb, rel_emb, query, target,
               cfg: RolloutConfig, bandwidth: int) -> list:
  """The walker's action slots at ``node``, in the order the policy indexes
  them: dicts of ``dst, rel, edge_id, score`` or None for a masked slot.
  Pruned: the top K by score (slot order on ties), masked slots last;
  unpruned: all ``bandwidth`` slots in importance order, visited concepts
  and slots past the degree masked in place."""
  rel_q = rel_emb @ query
  w_rel, w_query, w_target = cfg.prune_weights
  slots = []
  for slot, p in enumerate(capped_edges(kg, node, bandwidth)):
    v = int(kg.dst[p])
    if v in visited:
      slots.append(None)
      continue
    r = int(kg.rel[p])
    score = F32(w_rel * rel_q[r] + emb[v] @ (w_query * query +
                                             w_target * target)) + F32(0.0)
    slots.append(dict(dst=v, rel=r, edge_id=int(kg.edge_id[p]), score=score,
                      slot=slot))
  slots += [None] * (bandwidth - len(slots))
  if cfg.prune and cfg.top_k < bandwidth:
    kept = sorted((a for a in slots if a is not None),
                  key=lambda a: (-a["score"], a["slot"]))[:cfg.top_k]
    return kept + [None] * (cfg.top_k - len(kept))
  return slots


def reference_walk(params, kg, emb, rel_emb, query, target, targets, start,
                   actions, forced, cfg: RolloutConfig,
                   weights: RewardWeights, bandwidth: int) -> dict:
  """Replays ``actions`` [T] (with ``forced`` [T] flags) from ``start``.

  Returns the fields of :class:`~racer_jax.walker.rollout.Trajectory` as NumPy
  (``edges`` global edge ids, ``nodes`` concept ids)."""
  params = _as_numpy(params)
  emb, rel_emb = np.asarray(emb, F32), np.asarray(rel_emb, F32)
  query, target = np.asarray(query, F32), np.asarray(target, F32)
  targets = {int(t) for t in targets if t >= 0}
  tables = policy_tables(params, emb, rel_emb, query, target)
  dist = bfs_distance(kg, targets, bandwidth, cfg.max_steps)
  d = lambda n: dist.get(n, UNREACHABLE)
  steps = cfg.max_steps
  k = cfg.top_k if cfg.prune and cfg.top_k < bandwidth else bandwidth
  node, t = int(start), 0
  done = reached = node in targets
  nodes = np.full(steps + 1, node, np.int32)
  edges = np.full(steps, -1, np.int32)
  relations = np.full(steps, -1, np.int32)
  carry = policy_start(params, tables, node)
  out = collections.defaultdict(list)
  for step in range(steps):
    acts = actions_at(kg, node, set(nodes[:t + 1].tolist()), emb, rel_emb,
                      query, target, cfg, bandwidth)
    if done:
      acts = [None] * k
    rel_ids = np.array([0 if a is None else a["rel"] for a in acts])
    dst_ids = np.array([0 if a is None else a["dst"] for a in acts])
    logits = policy_logits(params, tables, carry, node, rel_ids, dst_ids)
    valid = np.append([a is not None for a in acts], True)
    log_probs = masked_log_softmax(logits, valid)
    closer = [i for i, a in enumerate(acts) if a is not None and
              d(node) < UNREACHABLE and d(a["dst"]) == d(node) - 1]
    teacher = k if done or not closer else max(
        closer, key=lambda i: (acts[i]["score"], -i))
    action = int(actions[step])
    moved = not done and action < k and acts[action] is not None
    reward = F32(0)
    if moved:
      a = acts[action]
      nxt = a["dst"]
      edges[t], relations[t], nodes[t + 1:] = a["edge_id"], a["rel"], nxt
      t += 1
      reached = reached or nxt in targets
      reward = (-weights.step + weights.relation * (rel_emb[a["rel"]] @ query)
                + weights.goal * (emb[nxt] @ target - emb[node] @ target) +
                weights.reach * F32(nxt in targets))
      carry = policy_advance(params, tables, carry, a["rel"], nxt)
    record_step(out, action, log_probs, valid, bool(forced[step]),
                    teacher, int(np.argmax(log_probs)), not done, reward)
    if moved:
      node = nxt
    done = (done or not moved or t >= steps or
            (cfg.stop_at_target and reached))
  result = stack_steps(out)
  result.update(nodes=nodes, edges=edges, relations=relations,
                reached=np.bool_(reached), length=np.int32(t),
                oracle=np.bool_(d(int(start)) <= steps))
  return result
