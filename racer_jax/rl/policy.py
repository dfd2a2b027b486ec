"""The walker policy (RACER's GraphAgent), Flax linen with pure init/apply.

State at step t = current node embedding ⊕ query embedding ⊕ target
embedding ⊕ a recurrent (GRU or LSTM) encoding of the path so far; it is mapped to a
vector ``s_t`` [H], and each action (an edge: relation ⊕ next node) gets the
logit ``<a_k, s_t>``; STOP gets ``<stop, s_t> + b_stop``.

Everything linear in the embeddings is applied once per question by
:meth:`WalkerPolicy.prepare` (a linear map of a concatenation is the sum of
maps of its parts), so a step only gathers rows of small [N, H] / [R2, H]
tables: no per-step matmul over embeddings.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp


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

  def prepare(self, node_emb, rel_emb, query, target):
    """Per-question tables: ``ctx`` [N, H], ``act_rel`` [R2, H], ``act_node``
    [N, H], ``hist_rel`` [R2, H], ``hist_node`` [N, H]."""
    ctx = (self.node_ctx(node_emb) + self.query_ctx(query)[None] +
           self.target_ctx(target)[None])
    return {"ctx": ctx, "act_rel": self.action_rel(rel_emb),
            "act_node": self.action_node(node_emb),
            "hist_rel": self.history_rel(rel_emb),
            "hist_node": self.history_node(node_emb)}

  def _hidden(self, carry):
    return carry if self.recurrent == "gru" else carry[1]

  def start(self, tables, node):
    """Recurrent carry after reading the start node."""
    h = self.hidden
    zeros = jnp.zeros((h,), tables["ctx"].dtype)
    carry = zeros if self.recurrent == "gru" else (zeros, zeros)
    carry, _ = self.cell(carry, tables["hist_node"][node])
    return carry

  def advance(self, tables, carry, relation, node):
    """Carry after moving along an edge with ``relation`` to ``node``."""
    carry, _ = self.cell(carry, tables["hist_rel"][relation] +
                         tables["hist_node"][node])
    return carry

  def logits(self, tables, carry, node, action_relation, action_node):
    """Unmasked logits [K + 1] at ``node`` for its K actions and STOP.

    Args:
      action_relation, action_node: int32 [K] of the node's actions.
    """
    s = jnp.tanh(tables["ctx"][node] +
                 self.state_history(self._hidden(carry)))
    s = jnp.tanh(self.state_out(s))                               # [H]
    # <act_rel[r] + act_node[v], s> = (act_rel @ s)[r] + (act_node @ s)[v]:
    # score every relation and node once, then gather K scalars (no [K, H]
    # gather, and a dense backward pass).
    by_relation = tables["act_rel"] @ s                           # [R2]
    by_node = tables["act_node"] @ s                              # [N]
    stop = jnp.dot(self.stop, s) + self.stop_bias
    return jnp.concatenate([by_relation[action_relation] +
                            by_node[action_node], stop[None]])

  def __call__(self, node_emb, rel_emb, query, target):
    """Touches every parameter (for ``init``); returns start logits."""
    tables = self.prepare(node_emb, rel_emb, query, target)
    carry = self.start(tables, 0)
    carry = self.advance(tables, carry, 0, 0)
    k = min(2, node_emb.shape[0])
    return self.logits(tables, carry, 0, jnp.zeros((k,), jnp.int32),
                       jnp.arange(k))


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
