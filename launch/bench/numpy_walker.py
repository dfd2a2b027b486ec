"""The rollout as a NumPy loop over hops, batched over all walkers.

The "MINERVA / MultiHopKG" baseline of the speed benchmark and a third
opinion on :mod:`racer_jax.rl.rollout`: the per-question preparation
(pruning, BFS teacher, policy and reward tables) is array ops over the
batch of questions, then each of the T hops is one set of array ops over
all ``B * W`` walkers at once: gathers of table rows, the state MLP and the
recurrent cell as batched matmuls, logits, a masked softmax, Gumbel-max
sampling, teacher mixing, the environment step and the reward. No JAX;
float32 throughout, with the flax params (after ``jax.device_get``).

Walkers sample with their own NumPy ``rng``; ``actions`` (and ``forced``)
replay given choices instead, so tests can check every field against JAX.

Typical use::

  prep = prepare(params, inputs, rel_emb, cfg)   # inputs: WalkInputs [B]
  traj = rollout(params, inputs, rel_emb, rng, p_teacher, cfg, weights,
                 prep=prep)                        # dict of [B, W, ...]
"""

from __future__ import annotations

import numpy as np

from .python_walker import _as_numpy, _unwrap, recurrent_kind
from racer_jax.graph.teacher import UNREACHABLE
from racer_jax.rl.policy import GATES, MASKED_LOGIT
from racer_jax.rl.reward import RewardWeights
from racer_jax.rl.rollout import RolloutConfig

F32 = np.float32


def _take(table, index):
  """``table[b, index[b, ...]]`` for ``table`` [B, M, ...], ``index`` [B,
  ...] (a flat ``np.take``: faster than 2-D fancy indexing)."""
  b, m = table.shape[:2]
  flat = table.reshape((b * m,) + table.shape[2:])
  offset = (np.arange(b) * m).reshape((b,) + (1,) * (index.ndim - 1))
  return np.take(flat, index + offset, axis=0)


def _dense(p, x):
  y = x @ p["kernel"]
  return y + p["bias"] if "bias" in p else y


def fused_cell(params) -> dict:
  """The recurrent cell's kernels concatenated over gates.

  Returns:
    dict of ``kind``, ``wi`` [H, G*H], ``bi`` [G*H] (input side), ``wh``
    [H, G*H], ``bh`` [G*H] (hidden side); G = 3 (GRU) or 4 (LSTM).
  """
  kind, c = recurrent_kind(params), _unwrap(params)["cell"]
  h = c["h" + GATES[kind][0]]["kernel"].shape[0]
  zeros = np.zeros(h, F32)
  cat = lambda side, part: np.concatenate(
      [c[side + g].get(part, zeros) if part == "bias" else c[side + g][part]
       for g in GATES[kind]], axis=-1).astype(F32)
  return {"kind": kind, "wi": cat("i", "kernel"), "bi": cat("i", "bias"),
          "wh": cat("h", "kernel"), "bh": cat("h", "bias")}


def cell_step(fused, carry, x):
  """One flax ``GRUCell`` / ``OptimizedLSTMCell`` step for a batch.

  Args:
    fused: :func:`fused_cell`; carry: h [M, H] (GRU) or (c, h) (LSTM);
    x: float32 [M, H] inputs.
  """
  sig = lambda v: F32(1) / (F32(1) + np.exp(-v))
  gi = x @ fused["wi"] + fused["bi"]
  if fused["kind"] == "gru":
    gh = carry @ fused["wh"] + fused["bh"]
    ir, iz, i_n = np.split(gi, 3, axis=-1)
    hr, hz, hn = np.split(gh, 3, axis=-1)
    r, z = sig(ir + hr), sig(iz + hz)
    n = np.tanh(i_n + r * hn)
    return (F32(1) - z) * n + z * carry
  c, h = carry
  gates = gi + h @ fused["wh"] + fused["bh"]
  i, f, g, o = np.split(gates, 4, axis=-1)
  new_c = sig(f) * c + sig(i) * np.tanh(g)
  return new_c, sig(o) * np.tanh(new_c)


# -- per-question preparation, batched over questions -------------------------
def _prune(x, rel_emb, cfg: RolloutConfig):
  """Top-k actions of every node of every question ([B, N, K] each)."""
  w_rel, w_query, w_target = cfg.prune_weights
  rel_sim = x.query @ rel_emb.T                          # [B, R2]
  node_q = np.einsum("bnd,bd->bn", x.node_emb, x.query)
  node_t = np.einsum("bnd,bd->bn", x.node_emb, x.target)
  b, n, d = x.neighbors.shape
  flat = x.neighbors.reshape(b, n * d)
  recv = np.take_along_axis(x.receivers, flat, 1)
  rel = np.take_along_axis(x.relation, flat, 1)
  score = (w_rel * np.take_along_axis(rel_sim, rel, 1) +
           w_query * np.take_along_axis(node_q, recv, 1) +
           w_target * np.take_along_axis(node_t, recv, 1)) + F32(0)  # -0 -> 0
  score = np.where(x.neighbor_mask, score.reshape(b, n, d), -np.inf)
  score = score.astype(F32)
  if not cfg.prune or cfg.top_k >= d:
    return np.where(x.neighbor_mask, x.neighbors, 0), x.neighbor_mask, score
  idx = np.argsort(-score, axis=-1, kind="stable")[..., :cfg.top_k]
  top = np.take_along_axis(score, idx, -1)
  mask = np.take_along_axis(x.neighbor_mask, idx, -1) & (top > -np.inf)
  edge = np.take_along_axis(x.neighbors, idx, -1)
  return np.where(mask, edge, 0), mask, np.where(mask, top, -np.inf)


def bfs_distance(senders, receivers, edge_mask, is_target, node_mask):
  """int32 [B, N] hops to the targets (Bellman-Ford relaxation over the
  edge lists of all questions at once, as :mod:`racer_jax.graph.teacher`)."""
  b, n = is_target.shape
  dist = np.where(is_target & node_mask, 0, UNREACHABLE).astype(np.int32)
  flat_senders = (senders + np.arange(b)[:, None] * n).ravel()
  for _ in range(n):
    via = np.where(edge_mask, np.take_along_axis(dist, receivers, 1) + 1,
                   UNREACHABLE).ravel()
    best = dist.ravel().copy()
    np.minimum.at(best, flat_senders, via)
    best = best.reshape(b, n)
    if np.array_equal(best, dist):
      break
    dist = best
  return np.minimum(dist, UNREACHABLE)


def prepare(params, inputs, rel_emb, cfg: RolloutConfig) -> dict:
  """Actions, teacher and tables of a batch of questions.

  Args:
    params: flax params (NumPy leaves); inputs: ``WalkInputs`` of NumPy
      arrays with leading axis B; rel_emb: float32 [R2, d].

  Returns:
    dict of ``action_edge``/``action_mask``/``action_relation``/
    ``action_node`` [B, N, K], ``teacher``/``distance`` int32 [B, N],
    ``is_target`` [B, N], policy tables ``ctx``/``act_node``/``hist_node``
    [B, N, H] and ``act_rel``/``hist_rel`` [R2, H], reward tables
    ``rel_query`` [B, R2] and ``node_target`` [B, N], and ``fused`` (the
    cell) and ``params``.
  """
  x, rel_emb = inputs, np.asarray(rel_emb, F32)
  params = _as_numpy(params)
  p = _unwrap(params)
  edge, mask, score = _prune(x, rel_emb, cfg)
  is_target = x.is_target & x.node_mask
  dist = bfs_distance(x.senders, x.receivers, x.edge_mask, x.is_target,
                      x.node_mask)
  b, n, k = edge.shape
  action_node = np.take_along_axis(x.receivers, edge.reshape(b, -1),
                                   1).reshape(b, n, k)
  next_dist = np.where(mask, np.take_along_axis(
      dist, action_node.reshape(b, -1), 1).reshape(b, n, k), UNREACHABLE)
  closer = mask & (next_dist == dist[..., None] - 1) & (
      dist[..., None] < UNREACHABLE)
  best = np.argmax(np.where(closer, score, -np.inf), axis=-1)
  teacher = np.where(closer.any(-1), best, k).astype(np.int32)
  ctx = (_dense(p["node_ctx"], x.node_emb) +
         _dense(p["query_ctx"], x.query)[:, None] +
         _dense(p["target_ctx"], x.target)[:, None])
  return {
      "params": params, "fused": fused_cell(params),
      "action_edge": edge.astype(np.int32), "action_mask": mask,
      "action_relation": np.take_along_axis(
          x.relation, edge.reshape(b, -1), 1).reshape(b, n, k),
      "action_node": action_node, "teacher": teacher, "distance": dist,
      "is_target": is_target, "receivers": x.receivers,
      "relation": x.relation, "ctx": ctx.astype(F32),
      "act_rel": _dense(p["action_rel"], rel_emb),
      "act_node": _dense(p["action_node"], x.node_emb),
      "hist_rel": _dense(p["history_rel"], rel_emb),
      "hist_node": _dense(p["history_node"], x.node_emb),
      "rel_query": x.query @ rel_emb.T,
      "node_target": np.einsum("bnd,bd->bn", x.node_emb, x.target)}


# -- the walk, batched over all walkers ---------------------------------------
def _gumbel_max(rng, z):
  u = rng.random(z.shape, dtype=F32)
  return np.argmax(z - np.log(-np.log(np.maximum(u, F32(1e-20)))), axis=-1)


def rollout(params, inputs, rel_emb, rng=None, p_teacher=0.0,
            cfg: RolloutConfig = RolloutConfig(),
            weights: RewardWeights = RewardWeights(), *, actions=None,
            forced=None, prep=None) -> dict:
  """All ``B * W`` walkers, one array program per hop.

  Args:
    params, inputs, rel_emb: as :func:`prepare` (``inputs.starts`` [B, W]).
    rng: seed or NumPy ``Generator`` for sampling and teacher forcing.
    p_teacher: probability of following the teacher at each step.
    actions: optional int [B, W, T] to replay; ``forced`` bool [B, W, T]
      the teacher-forced flags to report with them.
    prep: :func:`prepare` of ``inputs`` (computed when None).

  Returns:
    dict of ``rollout.Trajectory``'s fields, NumPy arrays [B, W, ...].
  """
  prep = prepare(params, inputs, rel_emb, cfg) if prep is None else prep
  rng = np.random.default_rng(rng)
  p = _unwrap(prep["params"])
  fused = prep["fused"]
  b, w = inputs.starts.shape
  m, steps = b * w, cfg.max_steps
  k = prep["action_edge"].shape[-1]
  q = np.repeat(np.arange(b), w)                          # question per walker
  nn_ = prep["is_target"].shape[1]
  flat = lambda name: prep[name].reshape((b * nn_,) + prep[name].shape[2:])
  at_node = {name: flat(name) for name in (
      "ctx", "act_node", "hist_node", "action_edge", "action_mask",
      "action_relation", "action_node", "teacher", "is_target",
      "node_target")}
  base = q * nn_                                          # row offsets
  start = inputs.starts.reshape(m).astype(np.int32)
  node = start.copy()
  t = np.zeros(m, np.int32)
  done = at_node["is_target"][base + node]
  reached = done.copy()
  nodes = np.repeat(node[:, None], steps + 1, 1)
  edges = np.full((m, steps), -1, np.int32)
  relations = np.full((m, steps), -1, np.int32)
  h = np.zeros((m, fused["wh"].shape[0]), F32)
  carry = cell_step(fused, h if fused["kind"] == "gru" else (h, h),
                    at_node["hist_node"][base + node])
  w_sh, w_out = p["state_history"]["kernel"], p["state_out"]
  out = {name: [] for name in ("action", "log_prob", "entropy",
                               "teacher_forced", "teacher_action",
                               "greedy_action", "active", "reward")}
  rows = np.arange(m)
  for step in range(steps):
    row = base + node
    hid = carry if fused["kind"] == "gru" else carry[1]
    s = np.tanh(at_node["ctx"][row] + hid @ w_sh)
    s = np.tanh(_dense(w_out, s))                                 # [M, H]
    acts = (np.take(prep["act_rel"], at_node["action_relation"][row], 0) +
            np.take(at_node["act_node"], at_node["action_node"][row] +
                    base[:, None], 0))                            # [M, K, H]
    logits = np.concatenate([np.einsum("mkh,mh->mk", acts, s),
                             (s @ p["stop"] + p["stop_bias"])[:, None]], 1)
    valid = np.concatenate([at_node["action_mask"][row] & ~done[:, None],
                            np.ones((m, 1), bool)], 1)
    z = np.where(valid, logits, F32(MASKED_LOGIT))
    z = z - z.max(-1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(-1, keepdims=True))
    greedy = np.argmax(log_probs, -1)
    teacher = np.where(done, k, at_node["teacher"][row])
    if actions is not None:
      action = np.asarray(actions).reshape(m, steps)[:, step]
      is_forced = (np.zeros(m, bool) if forced is None else
                   np.asarray(forced).reshape(m, steps)[:, step])
    elif cfg.greedy:
      action, is_forced = greedy, np.zeros(m, bool)
    else:
      is_forced = ~done & (rng.random(m, dtype=F32) < p_teacher)
      sampled = _gumbel_max(rng, np.where(valid, logits / F32(cfg.temperature),
                                          F32(MASKED_LOGIT)))
      action = np.where(is_forced, teacher, sampled)
    # env.step
    slot = np.minimum(action, k - 1)
    moved = ~done & (action < k) & at_node["action_mask"][row, slot]
    edge = np.where(moved, at_node["action_edge"][row, slot], -1)
    e_row = q * prep["receivers"].shape[1] + np.maximum(edge, 0)
    nxt = np.where(moved, prep["receivers"].ravel()[e_row], node)
    rel = np.where(moved, prep["relation"].ravel()[e_row], -1)
    reward = (-weights.step + weights.relation *
              prep["rel_query"][q, np.maximum(rel, 0)] +
              weights.goal * (at_node["node_target"][base + nxt] -
                              at_node["node_target"][row]) +
              weights.reach * at_node["is_target"][base + nxt].astype(F32))
    at = np.minimum(t, steps - 1)
    edges[rows, at] = np.where(moved, edge, edges[rows, at])
    relations[rows, at] = np.where(moved, rel, relations[rows, at])
    later = moved[:, None] & (np.arange(steps + 1)[None] > t[:, None])
    nodes = np.where(later, nxt[:, None], nodes)
    t = t + moved
    reached = reached | (moved & at_node["is_target"][base + nxt])
    active = ~done
    done = done | ~moved | (t >= steps)
    if cfg.stop_at_target:
      done = done | reached
    advanced = cell_step(fused, carry, np.take(prep["hist_rel"],
                                               np.maximum(rel, 0), 0) +
                         at_node["hist_node"][base + nxt])
    keep = lambda a, c: np.where(moved[:, None], a, c)
    carry = (keep(advanced, carry) if fused["kind"] == "gru" else
             tuple(map(keep, advanced, carry)))
    probs = np.exp(log_probs)
    for name, value in (
        ("action", action), ("log_prob", log_probs[rows, action]),
        ("entropy", -np.sum(np.where(valid, probs * log_probs, F32(0)), -1)),
        ("teacher_forced", is_forced), ("teacher_action", teacher),
        ("greedy_action", greedy), ("active", active),
        ("reward", np.where(moved, reward, F32(0)))):
      out[name].append(value)
    node = nxt
  dtypes = {"action": np.int32, "log_prob": F32, "entropy": F32,
            "teacher_forced": bool, "teacher_action": np.int32,
            "greedy_action": np.int32, "active": bool, "reward": F32}
  result = {name: np.stack(out[name], -1).astype(dtypes[name])
            for name in dtypes}
  result.update(nodes=nodes, edges=edges, relations=relations,
                reached=reached, length=t,
                oracle=prep["distance"].ravel()[base + start] <= steps)
  return {name: v.reshape((b, w) + v.shape[1:]) for name, v in result.items()}
