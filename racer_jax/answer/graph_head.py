"""Message passing over a question's refined paths, the QA-GNN way (jraph).

:class:`PathGraphEncoder` reads the batch of :mod:`racer_jax.answer.path_graph`
graphs. Each node starts from its frozen vector (the question's for node 0,
each choice's for nodes ``1..C``, the concept name's otherwise), its type and
its relevance to the question (QA-GNN's node relevance score, here the cosine
of the node's vector with the question's), projected to ``hidden``. Each
layer is a relational graph attention step as a :class:`jraph.GraphNetwork`:

- message ``m_st = W_m [h_s, type_s, rel_st, score_st]``;
- attention ``a_st = softmax_{s->t} (W_q [h_t, type_t]) · (W_k [h_s, type_s,
  rel_st]) / sqrt(hidden)`` over each node's incoming edges
  (:func:`jraph.segment_softmax`);
- update ``h_t <- LayerNorm(h_t + MLP([h_t, sum_s a_st m_st]))``.

The readout per choice is ``[h_choice, h_question * h_choice]``: the choice
node has gathered the paths that end at it, and through their shared
concepts the paths toward the other choices. The frozen head
(:class:`racer_jax.answer.choice_head.ChoiceHead`) concatenates it to its
own features, so the head learns how much to trust the graph.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import jraph

from racer_jax.answer import path_graph


class PathGraphEncoder(nn.Module):
  hidden: int = 128
  layers: int = 3
  dropout: float = 0.1

  @nn.compact
  def __call__(self, graph: dict, q, c, deterministic: bool = True):
    """graph: :meth:`path_graph.PathGraphs.take` arrays ([B, N, d] node
    vectors, [B, N] types, [B, E] senders / receivers / types / scores);
    q: [B, d]; c: [B, C, d] -> per choice readout [B, C, 2 * hidden]."""
    b, n, d = graph["node_vectors"].shape
    num_choices = c.shape[1]
    e = graph["senders"].shape[1]
    vectors = jnp.concatenate(
        [q[:, None], c, graph["node_vectors"][:, 1 + num_choices:]], axis=1)
    relevance = jnp.einsum("bnd,bd->bn", vectors, q)[..., None]
    node_type = nn.Embed(len(path_graph.NODE_TYPES), 16,
                         name="node_type")(graph["node_type"])
    h = nn.Dense(self.hidden, name="input")(
        jnp.concatenate([vectors, node_type, relevance], -1))
    edge_type = nn.Embed(path_graph.NUM_EDGE_TYPES, 32,
                         name="edge_type")(graph["edge_type"])
    offsets = (jnp.arange(b) * n)[:, None]
    edges = jnp.concatenate([edge_type, graph["edge_score"][..., None]], -1)
    tuple_ = jraph.GraphsTuple(
        nodes={"h": h.reshape(b * n, -1),
               "type": node_type.reshape(b * n, -1)},
        edges=edges.reshape(b * e, -1),
        senders=(graph["senders"] + offsets).reshape(-1),
        receivers=(graph["receivers"] + offsets).reshape(-1),
        globals=None, n_node=jnp.full((b,), n), n_edge=jnp.full((b,), e))
    for layer in range(self.layers):
      tuple_ = self._layer(tuple_, layer, deterministic)
    out = tuple_.nodes["h"].reshape(b, n, -1)
    h_question, h_choice = out[:, :1], out[:, 1:1 + num_choices]
    return jnp.concatenate([h_choice, h_question * h_choice], -1)

  def _layer(self, graph, layer: int, deterministic: bool):
    hidden = self.hidden
    message = nn.Dense(hidden, name=f"message_{layer}")
    query = nn.Dense(hidden, name=f"query_{layer}")
    key = nn.Dense(hidden, name=f"key_{layer}")
    update = nn.Dense(hidden, name=f"update_{layer}")
    norm = nn.LayerNorm(name=f"norm_{layer}")
    drop = nn.Dropout(self.dropout)

    def update_edge_fn(edges, sent, received, globals_):
      del received, globals_
      return {"relation": edges,
              "message": message(jnp.concatenate(
                  [sent["h"], sent["type"], edges], -1))}

    def attention_logit_fn(edges, sent, received, globals_):
      del globals_
      k = key(jnp.concatenate([sent["h"], sent["type"], edges["relation"]],
                              -1))
      qv = query(jnp.concatenate([received["h"], received["type"]], -1))
      return jnp.sum(qv * k, -1) / jnp.sqrt(hidden)

    def attention_reduce_fn(edges, weights):
      return dict(edges, message=edges["message"] * weights[:, None])

    def update_node_fn(nodes, sent_agg, received_agg, globals_):
      del sent_agg, globals_
      x = jnp.concatenate([nodes["h"], received_agg["message"]], -1)
      x = drop(nn.gelu(update(x)), deterministic=deterministic)
      return dict(nodes, h=norm(nodes["h"] + x))

    net = jraph.GraphNetwork(update_edge_fn=update_edge_fn,
                             update_node_fn=update_node_fn,
                             attention_logit_fn=attention_logit_fn,
                             attention_reduce_fn=attention_reduce_fn)
    out = net(graph)
    # the edges keep their relation features for the next layer
    return out._replace(edges=graph.edges)
