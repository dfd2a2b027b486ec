"""The walk environment, gymnax style: a state dataclass and pure
``reset``/``step`` over one question graph.

A walker stands on a node; its actions are the node's (pruned) action table
row plus STOP (index ``K``). Masked actions cannot be taken: ``step`` treats
them as STOP, and :func:`valid_actions` gives the mask the policy applies.
An episode ends on STOP, on reaching a target (``stop_at_target``) or after
``max_steps`` moves.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class WalkGraph:
  """What the environment needs of one (question, target) pair.

  Attributes:
    action_edge: int32 [N, K] local edge ids; action_mask: bool [N, K].
    action_node: int32 [N, K] the node each action leads to.
    action_relation: int32 [N, K] the relation of each action.
    is_target: bool [N].
  """
  action_edge: jax.Array
  action_mask: jax.Array
  action_node: jax.Array
  action_relation: jax.Array
  is_target: jax.Array

  @property
  def num_actions(self) -> int:
    """K + 1 (the last is STOP)."""
    return self.action_edge.shape[1] + 1


@flax.struct.dataclass
class WalkState:
  """One walker.

  Attributes:
    node: int32 [] current local node.
    t: int32 [] moves made so far.
    done: bool [].
    reached: bool [] whether the walk has stood on a target.
    path_nodes: int32 [T + 1] nodes visited (the last one repeated after the
      walk ends).
    path_edges: int32 [T] local edge ids taken, -1 for no move.
    path_relations: int32 [T] relation ids taken, -1 for no move.
  """
  node: jax.Array
  t: jax.Array
  done: jax.Array
  reached: jax.Array
  path_nodes: jax.Array
  path_edges: jax.Array
  path_relations: jax.Array


def reset(graph: WalkGraph, start, max_steps: int) -> WalkState:
  """A walker on ``start``; ``done`` at once if it starts on a target."""
  start = jnp.asarray(start, jnp.int32)
  on_target = graph.is_target[start]
  return WalkState(
      node=start, t=jnp.int32(0), done=on_target, reached=on_target,
      path_nodes=jnp.full((max_steps + 1,), start, jnp.int32),
      path_edges=jnp.full((max_steps,), -1, jnp.int32),
      path_relations=jnp.full((max_steps,), -1, jnp.int32))


def valid_actions(graph: WalkGraph, state: WalkState):
  """bool [K + 1]: the node's unmasked actions, STOP always; only STOP once
  the walk is done."""
  moves = graph.action_mask[state.node] & ~state.done
  return jnp.concatenate([moves, jnp.ones((1,), bool)])


def step(graph: WalkGraph, state: WalkState, action, *,
         stop_at_target: bool = True):
  """Takes ``action`` (in ``[0, K]``).

  Returns:
    ``(next_state, moved, edge, relation)``: ``moved`` is whether an edge
    was taken (False for STOP, a masked action or a finished walk);
    ``edge`` is the local edge id and ``relation`` its relation id, -1 for
    both when the walker did not move.
  """
  k = graph.action_edge.shape[1]
  max_steps = state.path_edges.shape[0]
  action = jnp.asarray(action, jnp.int32)
  # Select the action's slot from the node's rows with a one-hot sum: K is
  # small, and this avoids a chain of dependent gathers.
  hit = jnp.arange(k) == action
  pick = lambda row: jnp.sum(jnp.where(hit, row, 0))
  moved = (~state.done) & jnp.any(hit & graph.action_mask[state.node])
  edge = jnp.where(moved, pick(graph.action_edge[state.node]), -1)
  node = jnp.where(moved, pick(graph.action_node[state.node]), state.node)
  relation = jnp.where(moved, pick(graph.action_relation[state.node]), -1)
  t = state.t + moved.astype(jnp.int32)
  reached = state.reached | (moved & graph.is_target[node])
  done = state.done | ~moved | (t >= max_steps)
  if stop_at_target:
    done = done | reached
  # Record the move in slot ``state.t`` with selects, not ``.at[].set``:
  # the slot is data-dependent, and batched that becomes a scatter (a
  # serial loop on CPU). A finished walk leaves its path as it is.
  slot = moved & (jnp.arange(max_steps) == state.t)
  path_edges = jnp.where(slot, edge, state.path_edges)
  path_relations = jnp.where(slot, relation, state.path_relations)
  path_nodes = jnp.where(moved & (jnp.arange(max_steps + 1) > state.t),
                         node, state.path_nodes)
  return WalkState(node=node, t=t, done=done, reached=reached,
                   path_nodes=path_nodes, path_edges=path_edges,
                   path_relations=path_relations), moved, edge, relation
