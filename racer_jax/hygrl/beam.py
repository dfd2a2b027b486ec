"""HyGRL's adaptive beam search over one padded question graph.

The sequence starts as the question (seed) concepts. Each step gathers the
unvisited neighbors of every node in the sequence (the frontier), scores
them with a scorer giving logits (P(a) = σ(logit)), keeps those with
P(a) >= tau and appends the top ``beam_width`` by logit to the sequence (in
score order), marking them visited. Ranking by logits, not probabilities,
keeps a confident policy's order where σ saturates in float32. The search
stops after ``max_depth`` steps, when ``max_nodes`` nodes have been added,
or when no candidate passes tau. The retrieved subgraph is the subgraph
induced by the sequence.

Fixed shapes throughout (masks, not Python control flow), so it jits and
vmaps over questions. With ``sample=True`` the top-k is taken over
Gumbel-perturbed logits (a Plackett-Luce sample without replacement);
greedy search is the same code with no noise. The search records, per step,
the state the scorer saw, so a loss can recompute differentiable scores for
exactly those states.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import flax.struct
import jax
import jax.numpy as jnp

_NEG = -1e9


@dataclasses.dataclass(frozen=True)
class BeamConfig:
  beam_width: int = 4      # k: nodes appended per step at most
  tau: float = 0.5         # confidence threshold on P(a)
  max_depth: int = 3       # D_max: steps
  max_nodes: int = 12      # L: nodes appended in total at most
  window: int = 4          # sliding window of the last nodes (policy state)


@flax.struct.dataclass
class BeamState:
  """The sequence so far.

  Attributes:
    position: int32 [N] order of each node in the sequence (seeds first, by
      index), -1 if not in it.
    length: int32 [] nodes in the sequence; added: int32 [] appended ones.
    active: bool [] the search goes on.
  """
  position: jax.Array
  length: jax.Array
  added: jax.Array
  active: jax.Array

  @property
  def in_sequence(self):
    return self.position >= 0


@flax.struct.dataclass
class BeamTrace:
  """What each of the D steps saw and did (leading axis D).

  Attributes:
    window: int32 [D, Lw] last sequence nodes, most recent first, -1 pad.
    in_sequence: bool [D, N] the sequence before the step.
    frontier: bool [D, N] unvisited neighbors of the sequence.
    passing: bool [D, N] frontier nodes with P >= tau.
    chosen: int32 [D, k] appended nodes in order, -1 pad.
    active: bool [D] the step ran.
    prob: float32 [D, N] the scorer's P (0 off the frontier).
  """
  window: jax.Array
  in_sequence: jax.Array
  frontier: jax.Array
  passing: jax.Array
  chosen: jax.Array
  active: jax.Array
  prob: jax.Array


def initial_state(seeds, node_mask) -> BeamState:
  seeds = seeds & node_mask
  position = jnp.where(seeds, jnp.cumsum(seeds) - 1, -1).astype(jnp.int32)
  n_seeds = jnp.sum(seeds).astype(jnp.int32)
  return BeamState(position=position, length=n_seeds,
                   added=jnp.zeros((), jnp.int32), active=n_seeds > 0)


def window_nodes(state: BeamState, size: int):
  """int32 [size]: the last ``size`` sequence nodes, most recent first."""
  top, idx = jax.lax.top_k(state.position, size)
  return jnp.where(top >= 0, idx, -1).astype(jnp.int32)


def frontier_of(adj, in_sequence, node_mask):
  """bool [N]: nodes adjacent to the sequence, not in it."""
  touch = jnp.any(adj & in_sequence[:, None], axis=0)
  return touch & ~in_sequence & node_mask


def beam_search(scorer: Callable, adj, node_mask, seeds, cfg: BeamConfig, *,
                rng=None, sample: bool = False):
  """Runs the search for one question.

  Args:
    scorer: ``scorer(window [Lw], in_sequence [N], frontier [N]) ->
      logits [N]`` (only frontier entries are used).
    adj: bool [N, N] simple undirected adjacency; node_mask, seeds: bool [N].
    rng: key for ``sample=True``.

  Returns:
    ``(final BeamState, BeamTrace)``.
  """
  k = cfg.beam_width

  def step(state: BeamState, d):
    in_seq = state.in_sequence
    window = window_nodes(state, cfg.window)
    frontier = frontier_of(adj, in_seq, node_mask) & state.active
    logit = scorer(window, in_seq, frontier)
    prob = jnp.where(frontier, jax.nn.sigmoid(logit), 0.0)
    passing = frontier & (prob >= cfg.tau)
    if sample:
      noise = jax.random.gumbel(jax.random.fold_in(rng, d), logit.shape)
      logit = logit + noise
    room = jnp.minimum(k, cfg.max_nodes - state.added)
    top, idx = jax.lax.top_k(jnp.where(passing, logit, _NEG), k)
    take = (top > _NEG / 2) & (jnp.arange(k) < room)
    chosen = jnp.where(take, idx, -1).astype(jnp.int32)
    n_new = jnp.sum(take).astype(jnp.int32)
    rank = jnp.full(in_seq.shape, -1, jnp.int32).at[jnp.where(
        take, idx, in_seq.shape[0])].set(jnp.arange(k, dtype=jnp.int32),
                                         mode="drop")
    position = jnp.where(rank >= 0, state.length + rank, state.position)
    added = state.added + n_new
    new_state = BeamState(
        position=position, length=state.length + n_new, added=added,
        active=state.active & (n_new > 0) & (added < cfg.max_nodes))
    trace = BeamTrace(window=window, in_sequence=in_seq, frontier=frontier,
                      passing=passing, chosen=chosen, active=state.active,
                      prob=prob)
    return new_state, trace

  state = initial_state(seeds, node_mask)
  return jax.lax.scan(step, state, jnp.arange(cfg.max_depth))


def induced_reach(adj, selected, sources, max_iters: int):
  """bool [N]: selected nodes reachable from ``sources`` (& selected) inside
  the subgraph induced by ``selected``, within ``max_iters`` hops."""
  reach = sources & selected

  def body(_, reach):
    return reach | (jnp.any(adj & reach[:, None], axis=0) & selected)

  return jax.lax.fori_loop(0, max_iters, body, reach)


def sufficient(adj, selected, seeds, gold, max_iters: int):
  """The retrieved subgraph contains a gold answer concept connected to a
  question concept (HyGRL's outcome reward, as 0/1)."""
  reach = induced_reach(adj, selected, seeds, max_iters)
  return jnp.any(reach & gold)
