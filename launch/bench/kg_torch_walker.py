"""The whole-graph walk batched per hop in eager PyTorch, and its training
update (a benchmark baseline, as MultiHopKG runs its walkers).

The math of ``launch/bench/kg_numpy_walker.py`` in torch ops, with
autograd through the policy: same flax parameters (as torch leaves), same
capped CSR, same uniforms, so walks match the JAX walker (tests check it).
``torch`` is imported when a function here first runs.
"""

from __future__ import annotations

import importlib

import numpy as np

from racer_jax.walker.policy import GATES, MASKED_LOGIT
from racer_jax.walker.rollout import RolloutConfig

UNREACHABLE = 127


def _torch():
  return importlib.import_module("torch")


def to_torch(tree, requires_grad: bool = False):
  """NumPy pytree (dicts, leaves) -> torch tensors (ints become int64)."""
  torch = _torch()
  if isinstance(tree, dict):
    return {k: to_torch(v, requires_grad) for k, v in tree.items()}
  x = np.asarray(tree)
  if x.dtype.kind in "iu":
    return torch.from_numpy(x.astype(np.int64))
  t = torch.from_numpy(np.array(x))
  return t.requires_grad_(requires_grad) if x.dtype.kind == "f" else t


def walker_loss(traj, valid, cfg):
  """walker/losses.py and ``update._walker_losses``: REINFORCE with a
  leave-one-out baseline + teacher + entropy; mean over valid walkers."""
  torch = _torch()
  active, forced = traj["active"], traj["teacher_forced"]
  returns, g = torch.zeros_like(traj["reward"]), 0.0
  for t in reversed(range(returns.shape[-1])):
    g = torch.where(active[..., t], traj["reward"][..., t] + cfg.gamma * g,
                    0.0)
    returns[..., t] = g
  v = valid[..., None].float()                                  # [B, W, 1]
  count = v.sum(1, keepdim=True)
  others = (count - v).clamp_min(1.0)
  baseline = torch.where(count > 1, ((returns * v).sum(1, keepdim=True) -
                                     returns * v) / others, 0.0)
  lp = traj["log_prob"]
  pg = -((active & ~forced).float() * lp * (returns - baseline)).sum(-1)
  tf = -cfg.teacher_return * ((active & forced).float() * lp).sum(-1)
  ent = -torch.where(active, traj["entropy"], 0.0).sum(-1)
  per_walker = pg + cfg.teacher_weight * tf + cfg.entropy_coef * ent
  vf = valid.float()
  return (per_walker * vf).sum() / vf.sum().clamp_min(1.0)


def _unwrap(params):
  return params["params"] if "params" in params else params


def _dense(p, x):
  y = x @ p["kernel"]
  return y + p["bias"] if "bias" in p else y


def graph_to_torch(table, node_emb, rel_emb) -> dict:
  """The capped CSR and the vector tables as tensors."""
  return {"ptr": to_torch(table.ptr), "dst": to_torch(table.dst),
          "rel": to_torch(table.rel), "edge_id": to_torch(table.edge_id),
          "bandwidth": int(min(table.bandwidth, np.diff(table.ptr).max())),
          "node_emb": to_torch(np.asarray(node_emb, np.float32)),
          "rel_emb": to_torch(np.asarray(rel_emb, np.float32))}


def reach_distance(g, targets, max_hops: int):
  """int8 [B, V] (see :func:`kg_numpy_baseline.reach_distance`)."""
  torch = _torch()
  b, v = targets.shape[0], g["ptr"].shape[0] - 1
  dist = torch.full((b, v), UNREACHABLE, dtype=torch.int8)
  rows = torch.arange(b).repeat_interleave(targets.shape[1])
  flat = targets.reshape(-1)
  ok = flat >= 0
  dist[rows[ok], flat[ok]] = 0
  for hop in range(1, max_hops + 1):
    near = (dist < hop)[:, g["dst"]].to(torch.int32)
    cs = torch.cat([torch.zeros(b, 1, dtype=torch.int64),
                    torch.cumsum(near, 1)], 1)
    hit = cs[:, g["ptr"][1:]] - cs[:, g["ptr"][:-1]] > 0
    dist[hit & (dist == UNREACHABLE)] = hop
  return dist


def rollout(params, g, inputs, uniforms, p_teacher, cfg: RolloutConfig,
            weights, teacher: bool = True) -> dict:
  """All walkers of ``inputs`` (tensors ``query``, ``target``,
  ``target_concepts``, ``starts`` [B, ...]) per hop; ``params`` torch
  leaves (gradients flow to them). Returns Trajectory fields [B, W, ...]."""
  torch = _torch()
  p = _unwrap(params)
  c = p["cell"]
  kind = "gru" if "ir" in c else "lstm"
  hdim = p["state_out"]["kernel"].shape[1]
  cat = lambda side, part: torch.cat([
      c[side + x][part] if part in c[side + x] else torch.zeros(hdim)
      for x in GATES[kind]], -1)
  wi, bi, wh, bh = cat("i", "kernel"), cat("i", "bias"), cat("h", "kernel"), (
      cat("h", "bias"))
  node_emb, rel_emb = g["node_emb"], g["rel_emb"]
  node_cell = p["history_node"]["kernel"] @ wi
  cell_rel = _dense(p["history_rel"], rel_emb) @ wi + bi
  act_rel_t = torch.cat([_dense(p["action_rel"], rel_emb),
                         p["stop"][None]]).T
  q, tgt, targets = inputs["query"], inputs["target"], inputs[
      "target_concepts"]
  b, w = inputs["starts"].shape
  n, t_max, bw = b * w, cfg.max_steps, g["bandwidth"]
  qi = torch.arange(b).repeat_interleave(w)
  context = (_dense(p["query_ctx"], q) + _dense(p["target_ctx"], tgt) +
             p["node_ctx"]["bias"])[qi]
  with torch.no_grad():
    rel_query = (q @ rel_emb.T)[qi]
    dist = (reach_distance(g, targets, t_max) if teacher else torch.full(
        (b, g["ptr"].shape[0] - 1), UNREACHABLE, dtype=torch.int8))
  w_rel, w_query, w_target = cfg.prune_weights
  mix = (w_query * q + w_target * tgt)[qi]
  tq, tgt_n = targets[qi], tgt[qi]
  is_target = lambda x: ((x[:, None] == tq) & (tq >= 0)).any(1)

  def cell(carry, gi):
    if kind == "gru":
      ir, iz, i_n = gi.chunk(3, -1)
      hr, hz, hn = (carry @ wh + bh).chunk(3, -1)
      r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
      return (1 - z) * torch.tanh(i_n + r * hn) + z * carry
    cc, hh = carry
    i, f, gg, o = (gi + hh @ wh + bh).chunk(4, -1)
    new_c = torch.sigmoid(f) * cc + torch.sigmoid(i) * torch.tanh(gg)
    return new_c, torch.sigmoid(o) * torch.tanh(new_c)

  u = uniforms.reshape(n, t_max, 2)
  node = inputs["starts"].reshape(n)
  done = is_target(node)
  reached = done.clone()
  sim = (node_emb[node] * tgt_n).sum(-1)
  nodes = node[:, None].repeat(1, t_max + 1)
  edges = torch.full((n, t_max), -1, dtype=torch.int64)
  relations = torch.full((n, t_max), -1, dtype=torch.int64)
  length = torch.zeros(n, dtype=torch.int64)
  zeros = torch.zeros(n, hdim)
  carry = cell(zeros if kind == "gru" else (zeros, zeros),
               node_emb[node] @ node_cell + bi)
  ctx = node_emb[node] @ p["node_ctx"]["kernel"] + context
  out = {k: [] for k in ("action", "log_prob", "entropy", "teacher_forced",
                         "teacher_action", "active", "reward")}
  rows, slot = torch.arange(n), torch.arange(bw)
  descending = cfg.prune and cfg.top_k < bw
  for t in range(t_max):
    with torch.no_grad():
      lo = g["ptr"][node]
      pos = (lo[:, None] + slot).clamp_max(g["dst"].shape[0] - 1)
      dst, rel, eid = g["dst"][pos], g["rel"][pos], g["edge_id"][pos]
      mask = slot < (g["ptr"][node + 1] - lo)[:, None]
      mask &= ~(dst[:, :, None] == nodes[:, None, :]).any(-1)
      emb = node_emb[dst]
      score = rel_query.gather(1, rel) * w_rel + torch.einsum(
          "nbd,nd->nb", emb, mix)
      score = torch.where(score == 0, torch.zeros(()), score)
      score = torch.where(mask, score, -torch.inf)
      if descending:
        idx = torch.sort(-score, dim=1, stable=True).indices[:, :cfg.top_k]
        dst, rel, eid = dst.gather(1, idx), rel.gather(1, idx), eid.gather(
            1, idx)
        score, emb = score.gather(1, idx), emb[rows[:, None], idx]
        mask = mask.gather(1, idx) & (score > -torch.inf)
      mask &= ~done[:, None]
    k = mask.shape[1]
    hid = carry if kind == "gru" else carry[1]
    s = torch.tanh(ctx + hid @ p["state_history"]["kernel"])
    s = torch.tanh(_dense(p["state_out"], s))
    by_rel = s @ act_rel_t
    node_q = s @ p["action_node"]["kernel"].T
    logits = torch.cat([by_rel.gather(1, rel) +
                        torch.einsum("nkd,nd->nk", emb, node_q),
                        by_rel[:, -1:] + p["stop_bias"]], 1)
    valid = torch.cat([mask, torch.ones(n, 1, dtype=torch.bool)], 1)
    z = torch.where(valid, logits, torch.full((), MASKED_LOGIT))
    log_probs = torch.log_softmax(z, 1)
    probs = log_probs.exp()
    with torch.no_grad():
      zs = z if cfg.temperature == 1.0 else torch.where(
          valid, logits / cfg.temperature, torch.full((), MASKED_LOGIT))
      cdf = torch.cumsum(torch.exp(zs - zs.max(1, keepdim=True).values), 1)
      sampled = (cdf <= u[:, t, :1] * cdf[:, -1:]).sum(1).clamp_max(k)
      here = dist[qi, node].to(torch.int64)
      closer = mask & (dist[qi[:, None], dst].to(torch.int64) ==
                       here[:, None] - 1) & (here < UNREACHABLE)[:, None]
      if not descending:
        sc = torch.where(closer, score, -torch.inf)
        closer &= sc == sc.max(1, keepdim=True).values
      first = torch.where(closer, slot[:k], k).min(1).values
      teacher = torch.where(done, k, first)
      forced = ~done & (u[:, t, 1] < p_teacher)
      if not cfg.teacher_stops:
        forced = forced & (teacher < k)
      action = (torch.argmax(log_probs, 1) if cfg.greedy else
                torch.where(forced, teacher, sampled))
      if cfg.greedy:
        forced = torch.zeros(n, dtype=torch.bool)
      a = action.clamp_max(k - 1)
      moved = ~done & (action < k) & mask[rows, a]
      nxt = torch.where(moved, dst[rows, a], node)
      arrived = moved & is_target(nxt)
      r_ = torch.where(moved, rel[rows, a], 0)
      sim_next = torch.where(moved, (emb[rows, a] * tgt_n).sum(-1), sim)
      reward = torch.where(moved, -weights.step + weights.relation *
                           rel_query[rows, r_] + weights.goal *
                           (sim_next - sim) + weights.reach * arrived, 0.0)
      edges[moved, length[moved]] = eid[rows, a][moved]
      relations[moved, length[moved]] = r_[moved]
      later = torch.arange(t_max + 1)[None] > length[:, None]
      nodes = torch.where(moved[:, None] & later, nxt[:, None], nodes)
    new = cell(carry, cell_rel[r_] + node_emb[nxt] @ node_cell)
    keep = moved[:, None]
    carry = (torch.where(keep, new, carry) if kind == "gru" else
             tuple(torch.where(keep, x, y) for x, y in zip(new, carry)))
    ctx = torch.where(keep, node_emb[nxt] @ p["node_ctx"]["kernel"] +
                      context, ctx)
    for name, value in (
        ("action", action), ("log_prob", log_probs[rows, action]),
        ("entropy", -torch.where(valid, probs * log_probs, 0.0).sum(1)),
        ("teacher_forced", forced), ("teacher_action", teacher),
        ("active", ~done), ("reward", reward)):
      out[name].append(value)
    with torch.no_grad():
      length = length + moved
      reached = reached | arrived
      done = done | ~moved | (length >= t_max)
      if cfg.stop_at_target:
        done = done | reached
    node, sim = nxt, sim_next
  result = {k: torch.stack(v, 1).reshape(b, w, t_max) for k, v in out.items()}
  result.update(nodes=nodes.reshape(b, w, -1), edges=edges.reshape(b, w, -1),
                relations=relations.reshape(b, w, -1),
                reached=reached.reshape(b, w), length=length.reshape(b, w),
                oracle=(dist[qi, inputs["starts"].reshape(n)] <=
                        t_max).reshape(b, w))
  return result


def make_train_step(params, g, cfg, learning_rate: float, grad_clip: float):
  """``step(inputs, uniforms, p_teacher)`` -> loss: rollout, the walker
  loss (REINFORCE + leave-one-out baseline + teacher + entropy), backward,
  global-norm clipping and Adam on ``params`` in place. ``cfg``: a
  ``WalkerTrainConfig``."""
  torch = _torch()
  leaves, stack = [], [params]
  while stack:
    node = stack.pop()
    if isinstance(node, dict):
      stack.extend(node.values())
    else:
      leaves.append(node)
  opt = torch.optim.Adam(leaves, lr=learning_rate, eps=1e-8)

  def step(inputs, uniforms, p_teacher):
    traj = rollout(params, g, inputs, uniforms, p_teacher, cfg.rollout,
                   cfg.reward)
    loss = walker_loss(traj, inputs["start_mask"], cfg)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(leaves, grad_clip)
    if bool(torch.isfinite(loss) & torch.isfinite(norm)):
      opt.step()
    return float(loss.detach())

  return step
