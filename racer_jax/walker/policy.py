"""The walker policy (RACER's GraphAgent), Flax linen with pure init/apply.

State at step t = current node embedding ⊕ query embedding ⊕ target
embedding ⊕ a recurrent (GRU or LSTM) encoding of the path so far; it is
mapped to a vector ``s_t`` [H], and each action (an edge: relation ⊕ next
node) gets the logit ``<a_k, s_t>``; STOP gets ``<stop, s_t> + b_stop``.

The arithmetic is arranged for a batch of walkers (a linear map of a
concatenation is the sum of the maps of its parts):

- once per batch, :meth:`WalkerPolicy.relation_tables`: every relation's
  action vector and the cell's input projection of its history vector;
- once per (question, target), :meth:`WalkerPolicy.goal_context`: the
  question's part of the state (query and target);
- once per node a walker arrives at, :meth:`WalkerPolicy.read`: one matmul
  gives the node's part of the state and of the cell's input;
- per step, the state MLP and the cell's hidden side ([H] matmuls), the
  scores of every relation against ``s_t`` (the K actions' gathered) and
  the K candidates' node vectors against one [d] vector.

The cell is flax's ``GRUCell`` / ``OptimizedLSTMCell`` (same parameters,
same math) with each side's kernels concatenated over gates.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

# The gates of flax's GRUCell / OptimizedLSTMCell, in their parameter names.
GATES = {"gru": ("r", "z", "n"), "lstm": ("i", "f", "g", "o")}


class WalkerPolicy(nn.Module):
  """Goal-conditioned walker. Shapes: node_emb [N, d], rel_emb [R2, d],
  query/target [d]; H = ``hidden``; K actions + STOP."""
  hidden: int = 64
  recurrent: str = "gru"  # or "lstm"

  def setup(self):
    h = self.hidden
    self.node_ctx = nn.Dense(h, name="node_ctx")
    self.query_ctx = nn.Dense(h, use_bias=False, name="query_ctx")
    self.target_ctx = nn.Dense(h, use_bias=False, name="target_ctx")
    self.action_rel = nn.Dense(h, name="action_rel")
    self.action_node = nn.Dense(h, use_bias=False, name="action_node")
    self.history_rel = nn.Dense(h, name="history_rel")
    self.history_node = nn.Dense(h, use_bias=False, name="history_node")
    if self.recurrent == "gru":
      self.cell = nn.GRUCell(h, name="cell")
    elif self.recurrent == "lstm":
      self.cell = nn.OptimizedLSTMCell(h, name="cell")
    else:
      raise ValueError(f"recurrent must be gru or lstm, got "
                       f"{self.recurrent!r}")
    self.state_history = nn.Dense(h, use_bias=False, name="state_history")
    self.state_out = nn.Dense(h, name="state_out")
    self.stop = self.param("stop", nn.initializers.normal(0.1), (h,))
    self.stop_bias = self.param("stop_bias", nn.initializers.zeros, ())

  def _kernel(self, dense):
    return dense.variables["params"]["kernel"]

  def _cell_params(self):
    """The cell's kernels concatenated over gates: ``wi``, ``wh`` [H, G*H],
    ``bi``, ``bh`` [G*H] (G = 3 for GRU, 4 for LSTM; flax's parameters)."""
    p, h = self.cell.variables["params"], self.hidden
    zeros = jnp.zeros((h,), p["h" + GATES[self.recurrent][0]]["kernel"].dtype)
    cat = lambda side, part: jnp.concatenate(
        [p[side + g].get(part, zeros) if part == "bias" else p[side + g][part]
         for g in GATES[self.recurrent]], axis=-1)
    return {"wi": cat("i", "kernel"), "bi": cat("i", "bias"),
            "wh": cat("h", "kernel"), "bh": cat("h", "bias")}

  def relation_tables(self, rel_emb):
    """Question-independent tables: ``act_rel_t`` [H, R2 + 1] (action
    vectors, transposed, and STOP's vector last: one matmul scores both)
    and ``cell_rel`` [R2, G*H] (the cell's input projection of the history
    vector, input bias included)."""
    w = self._cell_params()
    act_rel = jnp.concatenate([self.action_rel(rel_emb), self.stop[None]])
    return {"act_rel_t": act_rel.T,
            "cell_rel": self.history_rel(rel_emb) @ w["wi"] + w["bi"]}

  def goal_context(self, query, target):
    """The query's and target's part of the state [H] (node bias included)."""
    return (self.query_ctx(query) + self.target_ctx(target) +
            self.node_ctx.variables["params"]["bias"])

  def read(self, tables, node):
    """What a walker takes from the node it arrives at: ``(context [H],
    cell_input [G*H])``, one matmul with the kernels side by side."""
    h, w = self.hidden, self._cell_params()
    kernel = jnp.concatenate([self._kernel(self.node_ctx),
                              self._kernel(self.history_node) @ w["wi"]], 1)
    both = tables["node_emb"][node] @ kernel
    return both[..., :h] + tables["context"], both[..., h:]

  def _hidden(self, carry):
    return carry if self.recurrent == "gru" else carry[1]

  def _cell(self, carry, gi):
    """One cell step from the input side's pre-activations ``gi`` [G*H]:
    flax's ``GRUCell`` / ``OptimizedLSTMCell`` math. ``carry=None`` is the
    zero state (its matmul skipped)."""
    w = self._cell_params()
    if carry is None:
      zeros = jnp.zeros(gi.shape[:-1] + (self.hidden,), gi.dtype)
      carry = zeros if self.recurrent == "gru" else (zeros, zeros)
      gh = jnp.broadcast_to(w["bh"], gi.shape)
    else:
      gh = self._hidden(carry) @ w["wh"] + w["bh"]
    if self.recurrent == "gru":
      ir, iz, i_n = jnp.split(gi, 3, axis=-1)
      hr, hz, hn = jnp.split(gh, 3, axis=-1)
      r, z = jax.nn.sigmoid(ir + hr), jax.nn.sigmoid(iz + hz)
      n = jnp.tanh(i_n + r * hn)
      return (1.0 - z) * n + z * carry
    i, f, g, o = jnp.split(gi + gh, 4, axis=-1)
    new_c = jax.nn.sigmoid(f) * carry[0] + jax.nn.sigmoid(i) * jnp.tanh(g)
    return new_c, jax.nn.sigmoid(o) * jnp.tanh(new_c)

  def start(self, tables, node):
    """The walker's carry ``(cell carry, node context [H])`` after reading
    the start node."""
    context, cell_input = self.read(tables, node)
    return self._cell(None, cell_input + self._cell_params()["bi"]), context

  def advance(self, tables, carry, relation, node):
    """Carry after moving along an edge with ``relation`` to ``node`` (the
    cell reads ``history_rel(relation) + history_node(node)``)."""
    context, cell_input = self.read(tables, node)
    return (self._cell(carry[0], tables["cell_rel"][relation] + cell_input),
            context)

  def candidate_logits(self, tables, carry, action_relation,
                       action_node_emb):
    """Unmasked logits [K + 1] for the current node's K actions and STOP,
    from the actions' node vectors (a [H, V] table per question would not
    fit the whole graph).

    ``<act_rel[r] + act_node[v], s>``: the relations are scored once
    (``s @ act_rel_t``, then K gathered), and ``<act_node[v], s> =
    <emb[v], W s>`` with ``W`` the ``action_node`` kernel [d, H], so the K
    gathered vectors are scored against one [d] vector.

    Args:
      carry: from :meth:`start` / :meth:`advance` at the current node.
      action_relation: int32 [K]; action_node_emb: float32 [K, d].
    """
    cell_carry, context = carry
    s = jnp.tanh(context + self.state_history(self._hidden(cell_carry)))
    s = jnp.tanh(self.state_out(s))                               # [H]
    by_relation = s @ tables["act_rel_t"]                         # [R2 + 1]
    node_query = self._kernel(self.action_node) @ s               # [d]
    stop = by_relation[-1] + self.stop_bias
    return jnp.concatenate([by_relation[action_relation] +
                            action_node_emb @ node_query, stop[None]])

  def __call__(self, node_emb, rel_emb, query, target):
    """Touches every parameter (for ``init``); returns start logits."""
    h = self.hidden
    zeros = jnp.zeros((h,), node_emb.dtype)
    self.cell(zeros if self.recurrent == "gru" else (zeros, zeros),
              self.history_rel(rel_emb[0]) + self.history_node(node_emb[0]))
    self.node_ctx(node_emb[0])
    self.action_node(node_emb[0])   # its kernel is read, not called, below
    tables = {**self.relation_tables(rel_emb), "node_emb": node_emb,
              "context": self.goal_context(query, target)}
    carry = self.start(tables, 0)
    carry = self.advance(tables, carry, 0, 0)
    k = min(2, node_emb.shape[0])
    return self.candidate_logits(tables, carry, jnp.zeros((k,), jnp.int32),
                                 node_emb[:k])


def init_policy(policy: WalkerPolicy, rng, embed_dim: int):
  """Parameters for embeddings of size ``embed_dim``."""
  node = jnp.zeros((3, embed_dim))
  return policy.init(rng, node, jnp.zeros((2, embed_dim)),
                     jnp.zeros((embed_dim,)), jnp.zeros((embed_dim,)))


MASKED_LOGIT = -1e9  # finite, so no inf/NaN reaches a gradient


def masked_log_softmax(logits, mask):
  """log-probabilities over unmasked entries; masked ones get about -1e9
  (probability exactly 0 in float32)."""
  return jax.nn.log_softmax(jnp.where(mask, logits, MASKED_LOGIT))


class HyGRLPolicy(nn.Module):
  """HyGRL's light policy: P(a) = σ(MLP([S ‖ A])).

  S is the sliding window of the last ``window`` sequence nodes' features
  (zero rows for padding), A a candidate's features. The first layer is
  split into its S and A parts, so S is projected once per state and added
  to every candidate's projection (the same as concatenating).
  """
  hidden_sizes: tuple[int, ...] = (512, 256, 128)

  @nn.compact
  def __call__(self, window_features, candidate_features):
    """Logits [N] for candidate features [N, F_a] given window features
    [Lw, F_s]."""
    first = self.hidden_sizes[0]
    s = nn.Dense(first, name="state")(window_features.reshape(-1))
    h = nn.relu(nn.Dense(first, use_bias=False, name="candidate")(
        candidate_features) + s[None])
    for i, size in enumerate(self.hidden_sizes[1:]):
      h = nn.relu(nn.Dense(size, name=f"hidden_{i}")(h))
    return nn.Dense(1, name="out")(h)[..., 0]
