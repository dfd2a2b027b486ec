"""The whole-graph walk batched per hop in NumPy (a benchmark baseline).

MultiHopKG style: all walkers advance together, one set of array ops per
hop: gather each walker's padded candidates (``ptr[u] + arange(B)`` into
the capped CSR), mask visited concepts, score them semantically, keep the
top K (a stable argsort: ties by lower slot), score those from the
history state, sample. The math is :mod:`racer_jax.walker.rollout`'s with
the same flax parameters and the same uniforms ``[B, W, T, 2]`` (inverse-
CDF sampling, then the teacher coin), so greedy and sampled walks match
the JAX walker (tests check it).
"""

from __future__ import annotations

import numpy as np

from racer_jax.walker.policy import GATES, MASKED_LOGIT
from racer_jax.walker.rollout import RolloutConfig

F32 = np.float32
UNREACHABLE = 127


def _unwrap(params):
  return params["params"] if "params" in params else params


def _dense(p, x):
  y = x @ p["kernel"]
  return y + p["bias"] if "bias" in p else y


def policy_tables(params, node_emb, rel_emb) -> dict:
  """The question-independent tables of :class:`WalkerPolicy`."""
  p = _unwrap(params)
  c = p["cell"]
  kind = "gru" if "ir" in c else "lstm"
  h = p["state_out"]["kernel"].shape[1]
  cat = lambda side, part: np.concatenate([
      c[side + g].get(part, np.zeros(h, F32)) if part == "bias" else
      c[side + g][part] for g in GATES[kind]], -1)
  wi, bi, wh, bh = cat("i", "kernel"), cat("i", "bias"), cat("h", "kernel"), (
      cat("h", "bias"))
  return {"kind": kind, "wh": wh, "bh": bh, "bi": bi, "hidden": h,
          "node_ctx": p["node_ctx"]["kernel"],
          "node_cell": p["history_node"]["kernel"] @ wi,
          "cell_rel": _dense(p["history_rel"], rel_emb) @ wi + bi,
          "act_rel_t": np.concatenate([_dense(p["action_rel"], rel_emb),
                                       p["stop"][None]]).T,
          "node_query": p["action_node"]["kernel"].T,        # [H, d]
          "state_history": p["state_history"]["kernel"],
          "state_out": p["state_out"], "stop_bias": p["stop_bias"],
          "node_emb": node_emb}


def _cell(tab, carry, gi):
  """One cell step from input pre-activations ``gi`` [N, G*H]."""
  sig = lambda x: F32(1) / (F32(1) + np.exp(-x))
  if tab["kind"] == "gru":
    gh = carry @ tab["wh"] + tab["bh"]
    ir, iz, i_n = np.split(gi, 3, -1)
    hr, hz, hn = np.split(gh, 3, -1)
    r, z = sig(ir + hr), sig(iz + hz)
    return (F32(1) - z) * np.tanh(i_n + r * hn) + z * carry
  c, h = carry
  i, f, g, o = np.split(gi + h @ tab["wh"] + tab["bh"], 4, -1)
  new_c = sig(f) * c + sig(i) * np.tanh(g)
  return new_c, sig(o) * np.tanh(new_c)


def reach_distance(table, targets, max_hops: int) -> np.ndarray:
  """int8 [B, V] hops to each question's targets [B, A] over the capped
  graph (backward frontier relaxation; a running sum counts each node's
  candidates already within reach)."""
  b, v = targets.shape[0], table.ptr.shape[0] - 1
  dist = np.full((b, v), UNREACHABLE, np.int8)
  rows = np.repeat(np.arange(b), targets.shape[1])
  ok = targets.reshape(-1) >= 0
  dist[rows[ok], targets.reshape(-1)[ok]] = 0
  for hop in range(1, max_hops + 1):
    near = (dist < hop)[:, table.dst].astype(np.int32)
    cs = np.concatenate([np.zeros((b, 1), np.int64), np.cumsum(near, 1)], 1)
    hit = cs[:, table.ptr[1:]] - cs[:, table.ptr[:-1]] > 0
    dist[hit & (dist == UNREACHABLE)] = hop
  return dist


def rollout(params, table, node_emb, rel_emb, inputs, uniforms, p_teacher,
            cfg: RolloutConfig, weights, teacher: bool = True) -> dict:
  """All walkers of ``inputs`` (a NumPy ``GoalInputs`` [B, ...]) per hop.

  Returns the :class:`~racer_jax.walker.rollout.Trajectory` fields as arrays
  [B, W, ...]; ``teacher=False`` skips the BFS distances (as the JAX
  rollout's)."""
  node_emb, rel_emb = np.asarray(node_emb, F32), np.asarray(rel_emb, F32)
  tab = policy_tables(params, node_emb, rel_emb)
  p = _unwrap(params)
  q, tgt = np.asarray(inputs.query, F32), np.asarray(inputs.target, F32)
  targets = np.asarray(inputs.target_concepts)
  b, w = inputs.starts.shape
  n, t_max, bw = b * w, cfg.max_steps, int(
      min(table.bandwidth, np.diff(table.ptr).max()))
  qi = np.repeat(np.arange(b), w)
  context = (_dense(p["query_ctx"], q) + _dense(p["target_ctx"], tgt) +
             p["node_ctx"]["bias"])[qi]
  rel_query = (q @ rel_emb.T)[qi]
  dist = (reach_distance(table, targets, t_max) if teacher else
          np.full((b, table.ptr.shape[0] - 1), UNREACHABLE, np.int8))
  w_rel, w_query, w_target = cfg.prune_weights
  mix = (w_query * q + w_target * tgt)[qi]
  tq = targets[qi]
  is_target = lambda x: np.any((x[:, None] == tq) & (tq >= 0), 1)
  u = np.asarray(uniforms, F32).reshape(n, t_max, 2)
  node = np.asarray(inputs.starts).reshape(n).astype(np.int64)
  done = is_target(node)
  reached = done.copy()
  sim = np.einsum("nd,nd->n", node_emb[node], tgt[qi])
  nodes = np.repeat(node[:, None], t_max + 1, 1)
  edges = np.full((n, t_max), -1, np.int32)
  relations = np.full((n, t_max), -1, np.int32)
  length = np.zeros(n, np.int32)
  h = tab["hidden"]
  zeros = np.zeros((n, h), F32)
  carry = zeros if tab["kind"] == "gru" else (zeros, zeros)
  carry = _cell(tab, carry, node_emb[node] @ tab["node_cell"] + tab["bi"])
  ctx = node_emb[node] @ tab["node_ctx"] + context
  out = {k: [] for k in ("action", "log_prob", "entropy", "teacher_forced",
                         "teacher_action", "greedy_action", "active",
                         "reward")}
  rows = np.arange(n)
  for t in range(t_max):
    lo = table.ptr[node]
    slot = np.arange(bw)
    pos = np.minimum(lo[:, None] + slot, table.dst.shape[0] - 1)
    dst, rel, eid = table.dst[pos], table.rel[pos], table.edge_id[pos]
    mask = slot < (table.ptr[node + 1] - lo)[:, None]
    mask &= ~np.any(dst[:, :, None] == nodes[:, None, :], -1)
    emb = node_emb[dst]                                           # [N, B, d]
    score = (w_rel * np.take_along_axis(rel_query, rel, 1) +
             np.einsum("nbd,nd->nb", emb, mix)).astype(F32)
    score[score == 0] = 0.0
    score = np.where(mask, score, -np.inf)
    descending = cfg.prune and cfg.top_k < bw
    if descending:
      idx = np.argsort(-score, axis=1, kind="stable")[:, :cfg.top_k]
      take = lambda x: np.take_along_axis(x, idx, 1)
      dst, rel, eid, score = take(dst), take(rel), take(eid), take(score)
      emb = np.take_along_axis(emb, idx[..., None], 1)
      mask = take(mask) & (score > -np.inf)
    mask &= ~done[:, None]
    k = mask.shape[1]
    hid = carry if tab["kind"] == "gru" else carry[1]
    s = np.tanh(ctx + hid @ tab["state_history"])
    s = np.tanh(_dense(tab["state_out"], s))
    by_rel = s @ tab["act_rel_t"]
    logits = np.concatenate([
        np.take_along_axis(by_rel, rel, 1) +
        np.einsum("nkd,nd->nk", emb, s @ tab["node_query"]),
        by_rel[:, -1:] + tab["stop_bias"]], 1)
    valid = np.concatenate([mask, np.ones((n, 1), bool)], 1)
    z = np.where(valid, logits, F32(MASKED_LOGIT))
    shifted = z - z.max(1, keepdims=True)
    expo = np.exp(shifted)
    cdf = np.cumsum(expo, 1)
    log_probs = shifted - np.log(cdf[:, -1:])
    probs = expo / cdf[:, -1:]
    if cfg.temperature != 1.0:
      zt = np.where(valid, logits / cfg.temperature, MASKED_LOGIT)
      cdf = np.cumsum(np.exp(zt - zt.max(1, keepdims=True)), 1)
    sampled = np.minimum(np.sum(cdf <= u[:, t, :1] * cdf[:, -1:], 1), k)
    greedy = np.argmax(log_probs, 1)
    here = dist[qi, node].astype(np.int32)
    closer = mask & (dist[qi[:, None], dst] == here[:, None] - 1) & (
        here < UNREACHABLE)[:, None]
    if not descending:
      sc = np.where(closer, score, -np.inf)
      closer &= sc == sc.max(1, keepdims=True)
    teacher = np.where(closer.any(1), np.argmax(closer, 1), k)
    teacher = np.where(done, k, teacher)
    forced = ~done & (u[:, t, 1] < p_teacher)
    if not cfg.teacher_stops:
      forced &= teacher < k
    if cfg.greedy:
      action, forced = greedy, np.zeros(n, bool)
    else:
      action = np.where(forced, teacher, sampled)
    a = np.minimum(action, k - 1)
    moved = ~done & (action < k) & mask[rows, a]
    nxt = np.where(moved, dst[rows, a], node)
    sim_next = np.where(moved, np.einsum("nd,nd->n", emb[rows, a], tgt[qi]),
                        sim)
    arrived = moved & is_target(nxt)
    r_ = np.maximum(np.where(moved, rel[rows, a], 0), 0)
    reward = np.where(moved, -weights.step + weights.relation *
                      rel_query[rows, r_] + weights.goal * (sim_next - sim) +
                      weights.reach * arrived, 0.0).astype(F32)
    edges[moved, length[moved]] = eid[rows, a][moved]
    relations[moved, length[moved]] = rel[rows, a][moved]
    nodes[moved] = np.where(np.arange(t_max + 1)[None] > length[moved, None],
                            nxt[moved, None], nodes[moved])
    gi = tab["cell_rel"][r_] + node_emb[nxt] @ tab["node_cell"]
    new = _cell(tab, carry, gi)
    keep = moved[:, None]
    carry = (np.where(keep, new, carry) if tab["kind"] == "gru" else
             tuple(np.where(keep, x, y) for x, y in zip(new, carry)))
    ctx = np.where(keep, node_emb[nxt] @ tab["node_ctx"] + context, ctx)
    for name, value in (
        ("action", action), ("log_prob", log_probs[rows, action]),
        ("entropy", -np.sum(np.where(valid, probs * log_probs, 0), 1)),
        ("teacher_forced", forced), ("teacher_action", teacher),
        ("greedy_action", greedy), ("active", ~done), ("reward", reward)):
      out[name].append(value)
    length += moved
    reached |= arrived
    done = done | ~moved | (length >= t_max)
    if cfg.stop_at_target:
      done |= reached
    node, sim = nxt, sim_next
  result = {k: np.stack(v, 1).reshape(b, w, t_max) for k, v in out.items()}
  result.update(nodes=nodes.reshape(b, w, -1), edges=edges.reshape(b, w, -1),
                relations=relations.reshape(b, w, -1),
                reached=reached.reshape(b, w), length=length.reshape(b, w),
                oracle=(dist[qi, np.asarray(inputs.starts).reshape(n)] <=
                        t_max).reshape(b, w))
  return result
