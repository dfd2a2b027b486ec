"""Adaptive beam search against a plain Python reference."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from racer_jax.hygrl import beam

N = 24


def _random_case(seed):
  rng = np.random.default_rng(seed)
  adj = rng.random((N, N)) < 0.12
  adj = np.triu(adj, 1)
  adj = adj | adj.T
  node_mask = np.ones(N, bool)
  node_mask[-rng.integers(0, 5):] = False if rng.random() < 0.7 else True
  adj &= node_mask[:, None] & node_mask[None, :]
  seeds = np.zeros(N, bool)
  seeds[rng.choice(N - 5, rng.integers(0, 4), replace=False)] = True
  base = rng.normal(0, 1.5, N).astype(np.float32)
  gold = np.zeros(N, bool)
  gold[rng.choice(N, 2, replace=False)] = True
  return adj, node_mask, seeds, base, gold


def _scorer(adj, base, window, in_seq, frontier):
  """logit(v) = base[v] + 0.5 · #window nodes adjacent to v."""
  del in_seq, frontier
  w_adj = jnp.where(window[:, None] >= 0, adj[jnp.maximum(window, 0)], False)
  return base + 0.5 * jnp.sum(w_adj, axis=0)


def reference_search(adj, node_mask, seeds, base, cfg):
  """Plain Python: lists and sets."""
  seq = [int(v) for v in np.flatnonzero(seeds & node_mask)]
  visited, added, active = set(seq), 0, bool(seq)
  for _ in range(cfg.max_depth):
    if not active:
      break
    window = seq[::-1][:cfg.window]
    frontier = sorted({v for u in seq for v in np.flatnonzero(adj[u])
                       if v not in visited and node_mask[v]})
    prob = {v: 1 / (1 + np.exp(-(base[v] + 0.5 * sum(adj[w, v] for w in
                                                        window))))
            for v in frontier}
    passing = [v for v in frontier if prob[v] >= cfg.tau]
    ranked = sorted(passing, key=lambda v: (-prob[v], v))
    chosen = ranked[:min(cfg.beam_width, cfg.max_nodes - added)]
    seq += chosen
    visited |= set(chosen)
    added += len(chosen)
    active = bool(chosen) and added < cfg.max_nodes
  return seq


def reference_sufficient(adj, seq, seeds, gold):
  sel = set(seq)
  reach = [v for v in np.flatnonzero(seeds) if v in sel]
  seen = set(reach)
  while reach:
    u = reach.pop()
    for v in np.flatnonzero(adj[u]):
      if v in sel and v not in seen:
        seen.add(v)
        reach.append(v)
  return any(gold[v] for v in seen)


CONFIGS = [beam.BeamConfig(beam_width=3, tau=0.5, max_depth=3, max_nodes=7,
                           window=2),
           beam.BeamConfig(beam_width=2, tau=0.2, max_depth=4, max_nodes=20,
                           window=4),
           beam.BeamConfig(beam_width=5, tau=0.8, max_depth=2, max_nodes=3,
                           window=1)]


@pytest.mark.parametrize("cfg", CONFIGS)
def test_greedy_search_matches_reference(cfg):
  chex.clear_trace_counter()
  cases = [_random_case(s) for s in range(16)]
  adj, mask, seeds, base, gold = (np.stack(x) for x in zip(*cases))

  @jax.jit
  @chex.assert_max_traces(n=1)
  def run(adj, mask, seeds, base, gold):
    def one(adj, mask, seeds, base, gold):
      final, trace = beam.beam_search(
          functools.partial(_scorer, adj, base), adj, mask, seeds, cfg)
      ok = beam.sufficient(adj, final.in_sequence, seeds, gold,
                           cfg.max_nodes + 1)
      return final, trace, ok
    return jax.vmap(one)(adj, mask, seeds, base, gold)

  final, trace, ok = jax.device_get(run(adj, mask, seeds, base, gold))
  for i, case in enumerate(cases):
    seq = reference_search(*case[:4], cfg)
    order = np.argsort(np.where(final.position[i] >= 0, final.position[i],
                                10 ** 6))[:len(seq)]
    assert final.length[i] == len(seq)
    assert order.tolist() == seq, (i, order.tolist(), seq)
    assert bool(ok[i]) == reference_sufficient(case[0], seq, case[2],
                                               case[4])
    chosen = [c for row in trace.chosen[i] for c in row if c >= 0]
    assert chosen == seq[int((case[2] & case[1]).sum()):]


def test_sampling_shares_the_code_path_and_respects_tau():
  adj, mask, seeds, base, _ = _random_case(9)
  cfg = CONFIGS[1]
  scorer = functools.partial(_scorer, jnp.asarray(adj), jnp.asarray(base))
  search = jax.jit(lambda rng, sample: beam.beam_search(
      scorer, adj, mask, seeds, cfg, rng=rng, sample=sample),
                   static_argnums=1)
  greedy = search(jax.random.PRNGKey(0), False)[0]
  seen = set()
  for s in range(20):
    final, trace = search(jax.random.PRNGKey(s), True)
    chosen = np.asarray(trace.chosen)
    prob = np.asarray(trace.prob)
    for d in range(cfg.max_depth):
      for c in chosen[d][chosen[d] >= 0]:
        assert prob[d, c] >= cfg.tau and trace.frontier[d, c]
    seen.add(tuple(np.asarray(final.position)))
  assert len(seen) > 1  # sampling explores
  assert int(greedy.added) <= cfg.max_nodes
