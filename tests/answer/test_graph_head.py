"""The graph head of the frozen answer model: the paths' graph built by hand
on one question, message passing that follows the edges (a layer reaches one
hop further) and ignores padding and the batch, and a head that learns from
the graph what the text cannot tell."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import test as test_config
from racer_jax.answer import choice_head, graph_head, path_graph
from racer_jax.knowledge.path_text import RetrievedPath, Triple
from racer_jax.runs.config_checks import ConfigError, check_config


class NameEncoder:
  """Fixed unit vectors per text (a stand-in for MiniLM: the builder only
  needs one vector per concept name)."""

  dim = 8

  def __init__(self):
    self.seen = []

  def encode(self, texts):
    self.seen.extend(texts)
    out = np.stack([np.random.default_rng(
        sum(map(ord, t)) * 7919 + len(t)).normal(size=self.dim)
                    for t in texts]).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _path(hops, reached, score=0.0):
  return RetrievedPath([Triple(h, r, t) for h, r, t in hops], score, reached,
                       True)


def test_graph_by_hand():
  choices = [[_path([("door", "atlocation", "bank")], True, 0.25)],
             [_path([("door", "partof", "room"),
                     ("room", "_atlocation", "big_house")], False, 0.5)],
             []]
  encoder = NameEncoder()
  g = path_graph.build([choices], 3, encoder)
  # nodes: question, 3 choices, door, bank, room, big_house; one padding
  assert g.node_type.shape == (1, 16)
  P = path_graph
  assert list(g.node_type[0, :8]) == [P.QUESTION, P.CHOICE, P.CHOICE,
                                      P.CHOICE, P.PATH_START, P.REACHED_END,
                                      P.CONCEPT, P.CONCEPT]
  assert (g.node_type[0, 8:] == P.PADDING).all()
  assert encoder.seen == ["door", "bank", "room", "big house"]
  np.testing.assert_array_equal(g.node_concept[0, :8], [0, 0, 0, 0, 1, 2, 3,
                                                        4])
  assert not g.concept_vectors[0].any()
  np.testing.assert_allclose(g.concept_vectors[4],
                             NameEncoder().encode(["big house"])[0])
  at = P.relation_id("atlocation")
  part = P.relation_id("partof")
  inv_at = P.relation_id("_atlocation")
  inv_part = P.relation_id("_partof")
  assert inv_at == at + P.NUM_RELATIONS
  edges = {(int(s), int(r), int(t), float(sc)) for s, r, t, sc in zip(
      g.senders[0], g.receivers[0], g.edge_type[0], g.edge_score[0])}
  want = {(0, 1, P.Q_TO_CHOICE, 0.0), (1, 0, P.CHOICE_TO_Q, 0.0),
          (0, 2, P.Q_TO_CHOICE, 0.0), (2, 0, P.CHOICE_TO_Q, 0.0),
          (0, 3, P.Q_TO_CHOICE, 0.0), (3, 0, P.CHOICE_TO_Q, 0.0),
          (0, 4, P.Q_TO_START, 0.0), (4, 0, P.START_TO_Q, 0.0),
          (4, 5, at, 0.0), (5, 4, inv_at, 0.0),
          (1, 5, P.CHOICE_TO_REACHED, 0.25), (5, 1, P.REACHED_TO_CHOICE, 0.25),
          (4, 6, part, 0.0), (6, 4, inv_part, 0.0),
          (6, 7, inv_at, 0.0), (7, 6, at, 0.0),
          (2, 7, P.CHOICE_TO_END, 0.5), (7, 2, P.END_TO_CHOICE, 0.5),
          (15, 15, P.PAD_EDGE, 0.0)}
  assert edges == want
  assert g.senders.shape == (1, 32)  # 18 edges, padded to 32
  with pytest.raises(ValueError, match="unknown relation 'flies'"):
    path_graph.build([[[_path([("a", "flies", "b")], True)]]], 1, encoder)


def _chain_graph(middle_vector, layers, min_nodes=0, min_edges=0,
                 other=None):
  """Readout of a question whose one path runs a -> b -> c -> d -> e toward
  choice 0 (not reached), with concept c's vector replaced."""
  encoder = NameEncoder()
  path = _path([("a", "isa", "b"), ("b", "isa", "c"), ("c", "isa", "d"),
                ("d", "isa", "e")], False)
  questions = [[[path], []]] + ([other] if other is not None else [])
  g = path_graph.build(questions, 2, encoder, min_nodes, min_edges)
  batch = g.take(np.arange(len(questions)))
  c_node = 5  # question, 2 choices, a, b, then c
  assert g.node_concept[0, c_node] == 3
  batch["node_vectors"][0, c_node] = middle_vector
  # the first question's own vectors, whatever else is in the batch
  q = jnp.asarray(np.stack([np.random.default_rng(i).normal(size=8)
                            for i in range(len(questions))]), jnp.float32)
  c = jnp.asarray(np.stack([np.random.default_rng(100 + i).normal(
      size=(2, 8)) for i in range(len(questions))]), jnp.float32)
  model = graph_head.PathGraphEncoder(hidden=16, layers=layers, dropout=0.0)
  params = model.init(jax.random.PRNGKey(layers), batch, q, c)
  return np.asarray(model.apply(params, batch, q, c))[0]


@pytest.mark.parametrize("layers,reaches", [(1, False), (3, True)])
def test_messages_follow_the_edges(layers, reaches):
  # c is 3 hops from choice 0 (c - d - e - choice) and from the question
  # (c - b - a - question): one layer cannot carry it to the readout, three
  # can
  zero, one = np.zeros(8, np.float32), np.ones(8, np.float32) / np.sqrt(8)
  changed = not np.allclose(_chain_graph(zero, layers),
                            _chain_graph(one, layers), atol=1e-6)
  assert changed == reaches


def test_padding_and_the_batch_do_not_change_a_question():
  v = np.ones(8, np.float32) / np.sqrt(8)
  alone = _chain_graph(v, 2)
  padded = _chain_graph(v, 2, min_nodes=64, min_edges=128)
  other = [[_path([("x", "causes", "y")], True)], [_path([("x", "isa", "z")],
                                                         False)]]
  batched = _chain_graph(v, 2, other=other)
  np.testing.assert_allclose(padded, alone, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(batched, alone, rtol=1e-5, atol=1e-5)


def _synthetic(n, rng, encoder):
  """Questions whose choices' texts say nothing; the gold choice's path
  runs through a concept of one kind (``good*``), the others' through
  another (``bad*``), two hops from the choice node."""
  knowledge, gold = [], []
  for i in range(n):
    g = int(rng.integers(3))
    choices = []
    for j in range(3):
      mid = f"good{rng.integers(5)}" if j == g else f"bad{rng.integers(5)}"
      choices.append([_path([(f"start{i % 7}", "relatedto", mid),
                             (mid, "relatedto", f"end{i % 11}_{j}")], True)])
    knowledge.append(choices)
    gold.append(g)
  graphs = path_graph.build(knowledge, 3, encoder)
  q = rng.normal(size=(n, 8)).astype(np.float32)
  c = rng.normal(size=(n, 3, 8)).astype(np.float32)
  return graphs, q, c, np.array(gold)


@pytest.mark.parametrize("with_graph", [True, False])
def test_the_head_learns_from_the_graph(with_graph):
  rng = np.random.default_rng(0)
  encoder = NameEncoder()
  train, q, c, gold = _synthetic(512, rng, encoder)
  test, tq, tc, tgold = _synthetic(128, rng, encoder)
  model = choice_head.ChoiceHead(hidden=32, dropout=0.0, graph_hidden=16,
                                 graph_layers=2)
  mask = jnp.ones((len(q), 3), bool)
  k = jnp.zeros_like(c)
  graph = train.take(np.arange(len(q))) if with_graph else None
  params = model.init(jax.random.PRNGKey(0), q, c, k, graph=graph)["params"]
  opt = optax.adam(3e-3)
  opt_state = opt.init(params)

  @jax.jit
  def step(params, opt_state):
    def loss(p):
      logits = choice_head.head_logits(model, p, (q, c, k), mask, graph=graph)
      return optax.softmax_cross_entropy_with_integer_labels(
          logits, gold).mean()
    grads = jax.grad(loss)(params)
    updates, opt_state = opt.update(grads, opt_state)
    return optax.apply_updates(params, updates), opt_state

  for _ in range(120):
    params, opt_state = step(params, opt_state)
  logits = choice_head.head_logits(
      model, params, (tq, tc, jnp.zeros_like(tc)), jnp.ones((len(tq), 3),
                                                            bool),
      graph=test.take(np.arange(len(tq))) if with_graph else None)
  accuracy = float(np.mean(np.argmax(np.asarray(logits), -1) == tgold))
  if with_graph:
    assert accuracy > 0.9
  else:
    assert accuracy < 0.5  # chance is 1/3: the text alone says nothing


def test_graph_needs_the_frozen_head():
  config = test_config.get_config()
  config.answer.graph_workdir = "/some/refiner"
  with pytest.raises(ConfigError, match="frozen_head"):
    check_config(config)
  config.answer.model = "frozen_head"
  check_config(config)
