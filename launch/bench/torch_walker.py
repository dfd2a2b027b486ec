"""The rollout and the training update in eager PyTorch (CPU), as
MultiHopKG runs its walkers: batched over all walkers, one set of tensor ops
per hop, autograd through the policy tables, ``torch.optim.Adam``.

A benchmark baseline, not a dependency: ``torch`` is imported when a
function here first runs, so this module imports without it. The math is
``launch/bench/numpy_walker.py``'s (same flax params, same inputs,
same per-question preparation); walkers sample with a ``torch.Generator``,
and ``actions``/``forced`` replay given choices (for parity tests).

Typical use::

  params = to_torch(jax.device_get(params))
  traj = rollout(params, inputs_to_torch(inputs), to_torch(rel_emb),
                 torch.Generator().manual_seed(0), 0.5, cfg, weights)
  step = make_train_step(params, train_cfg, learning_rate=1e-3,
                         grad_clip=1.0)
  metrics = step(batch_to_torch(batch), concept_emb, rel_emb, 0.5, gen)
"""

from __future__ import annotations

import dataclasses
import importlib
import types

import numpy as np

from racer_jax.graph.teacher import UNREACHABLE
from racer_jax.rl.policy import GATES, MASKED_LOGIT
from racer_jax.rl.reward import RewardWeights
from racer_jax.rl.rollout import RolloutConfig


def _torch():
  return importlib.import_module("torch")


def available() -> bool:
  try:
    _torch()
  except ImportError:
    return False
  return True


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


def inputs_to_torch(inputs) -> types.SimpleNamespace:
  """A (NumPy) ``WalkInputs`` [B, ...] as a namespace of tensors."""
  return types.SimpleNamespace(**{
      f.name: to_torch(getattr(inputs, f.name))
      for f in dataclasses.fields(inputs)})


def _unwrap(params):
  return params["params"] if "params" in params else params


def _dense(p, x):
  y = x @ p["kernel"]
  return y + p["bias"] if "bias" in p else y


def _cell(params):
  """The cell's kernels concatenated over gates (differentiable)."""
  torch, c = _torch(), _unwrap(params)["cell"]
  kind = "gru" if "ir" in c else "lstm"
  cat = lambda side, part: torch.cat([
      c[side + g][part] if part in c[side + g] else
      torch.zeros(c[side + g]["kernel"].shape[1]) for g in GATES[kind]], -1)
  return {"kind": kind, "wi": cat("i", "kernel"), "bi": cat("i", "bias"),
          "wh": cat("h", "kernel"), "bh": cat("h", "bias")}


def cell_step(fused, carry, x):
  """flax ``GRUCell`` / ``OptimizedLSTMCell`` over a batch [M, H]."""
  torch = _torch()
  gi = x @ fused["wi"] + fused["bi"]
  if fused["kind"] == "gru":
    ir, iz, i_n = gi.chunk(3, -1)
    hr, hz, hn = (carry @ fused["wh"] + fused["bh"]).chunk(3, -1)
    r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
    return (1 - z) * torch.tanh(i_n + r * hn) + z * carry
  c, h = carry
  i, f, g, o = (gi + h @ fused["wh"] + fused["bh"]).chunk(4, -1)
  new_c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
  return new_c, torch.sigmoid(o) * torch.tanh(new_c)


def _rows(x, index):
  """``x[b, index[b, ...]]``: x [B, M, ...], index int64 [B, ...]."""
  b, m = x.shape[:2]
  off = (_torch().arange(b) * m).view((b,) + (1,) * (index.dim() - 1))
  return x.reshape((b * m,) + x.shape[2:])[index + off]


def prepare(params, x, rel_emb, cfg: RolloutConfig) -> dict:
  """Pruning, BFS teacher, policy and reward tables of B questions (the
  tables carry gradients to ``params``). ``x``: :func:`inputs_to_torch`."""
  torch = _torch()
  p = _unwrap(params)
  with torch.no_grad():
    w_rel, w_query, w_target = cfg.prune_weights
    b, n, d = x.neighbors.shape
    rel_sim = x.query @ rel_emb.T
    node_q = torch.einsum("bnd,bd->bn", x.node_emb, x.query)
    node_t = torch.einsum("bnd,bd->bn", x.node_emb, x.target)
    flat = x.neighbors.reshape(b, n * d)
    recv, rel = x.receivers.gather(1, flat), x.relation.gather(1, flat)
    score = (w_rel * rel_sim.gather(1, rel) + w_query * node_q.gather(1, recv)
             + w_target * node_t.gather(1, recv)) + 0.0
    score = torch.where(x.neighbor_mask, score.view(b, n, d), -torch.inf)
    if cfg.prune and cfg.top_k < d:
      idx = torch.sort(-score, stable=True, dim=-1).indices[..., :cfg.top_k]
      score = score.gather(-1, idx)
      mask = x.neighbor_mask.gather(-1, idx) & (score > -torch.inf)
      edge = torch.where(mask, x.neighbors.gather(-1, idx), 0)
    else:
      mask, edge = x.neighbor_mask, torch.where(x.neighbor_mask,
                                                x.neighbors, 0)
    k = edge.shape[-1]
    # BFS distance: relaxation over every question's edges at once.
    dist = torch.where(x.is_target & x.node_mask, 0, UNREACHABLE)
    senders = (x.senders + torch.arange(b)[:, None] * n).reshape(-1)
    for _ in range(n):
      via = torch.where(x.edge_mask, dist.gather(1, x.receivers) + 1,
                        UNREACHABLE)
      best = dist.reshape(-1).scatter_reduce(0, senders, via.reshape(-1),
                                             "amin").view(b, n)
      if torch.equal(best, dist):
        break
      dist = best
    action_node = x.receivers.gather(1, edge.view(b, -1)).view(b, n, k)
    next_dist = torch.where(mask, dist.gather(1, action_node.view(b, -1))
                            .view(b, n, k), UNREACHABLE)
    closer = mask & (next_dist == dist[..., None] - 1) & (
        dist[..., None] < UNREACHABLE)
    best = torch.where(closer, score, -torch.inf).argmax(-1)
    teacher = torch.where(closer.any(-1), best, k)
  ctx = (_dense(p["node_ctx"], x.node_emb) +
         _dense(p["query_ctx"], x.query)[:, None] +
         _dense(p["target_ctx"], x.target)[:, None])
  return {
      "fused": _cell(params), "action_edge": edge, "action_mask": mask,
      "action_relation": x.relation.gather(1, edge.view(b, -1)).view(b, n, k),
      "action_node": action_node, "teacher": teacher, "distance": dist,
      "is_target": x.is_target & x.node_mask, "ctx": ctx,
      "act_rel": _dense(p["action_rel"], rel_emb),
      "act_node": _dense(p["action_node"], x.node_emb),
      "hist_rel": _dense(p["history_rel"], rel_emb),
      "hist_node": _dense(p["history_node"], x.node_emb),
      "rel_query": x.query @ rel_emb.T,
      "node_target": torch.einsum("bnd,bd->bn", x.node_emb, x.target)}


def rollout(params, x, rel_emb, generator=None, p_teacher=0.0,
            cfg: RolloutConfig = RolloutConfig(),
            weights: RewardWeights = RewardWeights(), *, actions=None,
            forced=None, prep=None) -> dict:
  """All ``B * W`` walkers, one set of tensor ops per hop.

  Args:
    params: flax params as torch tensors; x: :func:`inputs_to_torch`;
    rel_emb: float32 [R2, d] tensor; generator: ``torch.Generator``.
    actions, forced: optional int/bool [B, W, T] to replay.

  Returns:
    dict of ``rollout.Trajectory``'s fields as tensors [B, W, ...];
    ``log_prob`` and ``entropy`` carry gradients.
  """
  torch = _torch()
  prep = prepare(params, x, rel_emb, cfg) if prep is None else prep
  p, fused = _unwrap(params), prep["fused"]
  b, w = x.starts.shape
  m, steps, k = b * w, cfg.max_steps, prep["action_edge"].shape[-1]
  q = torch.arange(b).repeat_interleave(w)
  n_nodes, n_edges = prep["is_target"].shape[1], x.receivers.shape[1]
  flat = lambda name: prep[name].reshape((-1,) + prep[name].shape[2:])
  at = {name: flat(name) for name in (
      "ctx", "act_node", "hist_node", "action_edge", "action_mask",
      "action_relation", "action_node", "teacher", "is_target",
      "node_target")}
  base, e_base = q * n_nodes, q * n_edges
  receivers, relation = x.receivers.reshape(-1), x.relation.reshape(-1)
  start = x.starts.reshape(m)
  node, t = start.clone(), torch.zeros(m, dtype=torch.int64)
  done = at["is_target"][base + node]
  reached = done.clone()
  nodes = node[:, None].repeat(1, steps + 1)
  edges = torch.full((m, steps), -1, dtype=torch.int64)
  relations = edges.clone()
  zeros = torch.zeros(m, fused["wh"].shape[0])
  carry = cell_step(fused, zeros if fused["kind"] == "gru" else (zeros, zeros),
                    at["hist_node"][base + node])
  rows, masked = torch.arange(m), torch.tensor(MASKED_LOGIT)
  out = {name: [] for name in ("action", "log_prob", "entropy",
                               "teacher_forced", "teacher_action",
                               "greedy_action", "active", "reward")}
  for step in range(steps):
    row = base + node
    hid = carry if fused["kind"] == "gru" else carry[1]
    s = torch.tanh(at["ctx"][row] + hid @ p["state_history"]["kernel"])
    s = torch.tanh(_dense(p["state_out"], s))
    acts = (prep["act_rel"][at["action_relation"][row]] +
            at["act_node"][at["action_node"][row] + base[:, None]])
    logits = torch.cat([torch.einsum("mkh,mh->mk", acts, s),
                        (s @ p["stop"] + p["stop_bias"])[:, None]], 1)
    valid = torch.cat([at["action_mask"][row] & ~done[:, None],
                       torch.ones(m, 1, dtype=torch.bool)], 1)
    log_probs = torch.log_softmax(torch.where(valid, logits, masked), -1)
    greedy = log_probs.detach().argmax(-1)
    teacher = torch.where(done, k, at["teacher"][row])
    if actions is not None:
      action = torch.as_tensor(actions).reshape(m, steps)[:, step].long()
      is_forced = (torch.zeros(m, dtype=torch.bool) if forced is None else
                   torch.as_tensor(forced).reshape(m, steps)[:, step])
    elif cfg.greedy:
      action, is_forced = greedy, torch.zeros(m, dtype=torch.bool)
    else:
      is_forced = ~done & (torch.rand(m, generator=generator) < p_teacher)
      z = torch.where(valid, logits.detach() / cfg.temperature, masked)
      u = torch.rand(z.shape, generator=generator).clamp_min(1e-20)
      action = torch.where(is_forced, teacher,
                           (z - torch.log(-torch.log(u))).argmax(-1))
    slot = action.clamp_max(k - 1)
    moved = ~done & (action < k) & at["action_mask"][row, slot]
    edge = torch.where(moved, at["action_edge"][row, slot], -1)
    nxt = torch.where(moved, receivers[e_base + edge.clamp_min(0)], node)
    rel = torch.where(moved, relation[e_base + edge.clamp_min(0)], -1)
    with torch.no_grad():
      reward = (-weights.step + weights.relation *
                prep["rel_query"][q, rel.clamp_min(0)] +
                weights.goal * (at["node_target"][base + nxt] -
                                at["node_target"][row]) +
                weights.reach * at["is_target"][base + nxt].float())
      slot_t = t.clamp_max(steps - 1)
      edges[rows, slot_t] = torch.where(moved, edge, edges[rows, slot_t])
      relations[rows, slot_t] = torch.where(moved, rel,
                                            relations[rows, slot_t])
      later = moved[:, None] & (torch.arange(steps + 1)[None] > t[:, None])
      nodes = torch.where(later, nxt[:, None], nodes)
    t = t + moved.long()
    reached = reached | (moved & at["is_target"][base + nxt])
    active = ~done
    done = done | ~moved | (t >= steps)
    if cfg.stop_at_target:
      done = done | reached
    advanced = cell_step(fused, carry, prep["hist_rel"][rel.clamp_min(0)] +
                         at["hist_node"][base + nxt])
    keep = lambda a, c: torch.where(moved[:, None], a, c)
    carry = (keep(advanced, carry) if fused["kind"] == "gru" else
             tuple(map(keep, advanced, carry)))
    probs = log_probs.exp()
    for name, value in (
        ("action", action), ("log_prob", log_probs[rows, action]),
        ("entropy", -torch.where(valid, probs * log_probs, 0.0).sum(-1)),
        ("teacher_forced", is_forced), ("teacher_action", teacher),
        ("greedy_action", greedy), ("active", active),
        ("reward", torch.where(moved, reward, 0.0))):
      out[name].append(value)
    node = nxt
  result = {name: torch.stack(v, -1) for name, v in out.items()}
  result.update(nodes=nodes, edges=edges, relations=relations,
                reached=reached, length=t,
                oracle=prep["distance"].reshape(-1)[base + start] <= steps)
  return {name: v.reshape((b, w) + v.shape[1:]) for name, v in result.items()}


# -- the training update ------------------------------------------------------
def walk_inputs(batch, concept_emb, num_walkers: int) -> types.SimpleNamespace:
  """:func:`racer_jax.rl.walk_inputs.walk_inputs` toward the gold choice;
  ``batch``: a ``GraphBatch`` whose leaves are tensors."""
  torch, g = _torch(), batch.graphs
  node_mask = batch.node_mask
  node_emb = concept_emb[g.nodes["concept"].clamp_min(0)] * node_mask[..., None]
  choice = batch.gold.clamp_min(0)
  is_target = batch.choice_mask.gather(
      2, choice[:, None, None].expand(-1, node_mask.shape[1], 1))[..., 0]
  is_target = is_target & node_mask & (batch.gold >= 0)[:, None]
  target = torch.einsum("bn,bnd->bd", is_target.float(), node_emb)
  norm = target.norm(dim=-1, keepdim=True)
  target = target / torch.where(norm > 0, norm, 1.0)
  q = g.nodes["is_question"] & node_mask
  count = q.sum(1)
  order = torch.sort((~q).to(torch.int8), stable=True, dim=1).indices
  slots = torch.arange(num_walkers)[None] % count.clamp_min(1)[:, None]
  usable = batch.example_mask & is_target.any(1)
  return types.SimpleNamespace(
      node_emb=node_emb, query=batch.query, target=target,
      is_target=is_target, node_mask=node_mask, neighbors=batch.neighbors,
      neighbor_mask=batch.neighbor_mask, senders=g.senders,
      receivers=g.receivers, relation=g.edges["relation"],
      edge_mask=batch.edge_mask, starts=order.gather(1, slots),
      start_mask=((count > 0) & usable)[:, None].expand(-1, num_walkers),
      prior=torch.zeros(batch.neighbors.shape),   # no heuristic prior
      edge_quality=torch.zeros(batch.edge_mask.shape))  # no memory


def batch_to_torch(batch):
  """A NumPy ``GraphBatch`` with tensor leaves (same structure)."""
  return batch.replace(**{
      f.name: (getattr(batch, f.name)._replace(
          **{k: to_torch(v) for k, v in getattr(batch, f.name)._asdict()
             .items() if v is not None}) if f.name == "graphs" else
               to_torch(getattr(batch, f.name)))
      for f in dataclasses.fields(batch)})


def walker_loss(traj, valid, cfg):
  """rl/losses.py and ``train._walker_losses``: REINFORCE with a
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


def make_train_step(params, cfg, learning_rate: float, grad_clip: float):
  """``step(batch, concept_emb, rel_emb, p_teacher, generator)`` -> loss:
  inputs, rollout, loss, backward, global-norm clipping and Adam on
  ``params`` (torch leaves with ``requires_grad``), in place; a non-finite
  loss or gradient skips the update (as the JAX step). ``cfg``: a
  ``WalkerTrainConfig``."""
  torch = _torch()
  leaves = []
  stack = [params]
  while stack:
    node = stack.pop()
    if isinstance(node, dict):
      stack.extend(node.values())
    else:
      leaves.append(node)
  opt = torch.optim.Adam(leaves, lr=learning_rate, eps=1e-8)

  def step(batch, concept_emb, rel_emb, p_teacher, generator=None):
    x = walk_inputs(batch, concept_emb, cfg.num_walkers)
    traj = rollout(params, x, rel_emb, generator, p_teacher, cfg.rollout,
                   cfg.reward)
    loss = walker_loss(traj, x.start_mask, cfg)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(leaves, grad_clip)
    if bool(torch.isfinite(loss) & torch.isfinite(norm)):
      opt.step()
    return float(loss.detach())

  return step
