"""The fast AnswerAgent option: a small head over frozen sentence vectors.

Each choice is described by frozen all-MiniLM-L6-v2 vectors (384-d,
L2-normalized) of the question ``q``, the choice ``c`` and its knowledge
sentences ``k`` (zeros without knowledge), combined as
``[q, c, k, q⊙c, c⊙k, q⊙k]`` plus the three cosine similarities
``<q,c>, <c,k>, <q,k>`` (a direct route that generalizes from few
questions) and scored by an MLP; softmax over a
question's choices, cross-entropy. Encoding runs once (cached); training
takes seconds per epoch on a CPU.

With ``answer.evidence_workdir`` each choice also gets the whole-graph
walker's evidence as :data:`EVIDENCE_DIM` numbers (:func:`evidence_features`:
reach frequency, best reaching log-probability, refiner score, each also
relative to the question's best choice), concatenated to the MLP's input.
With ``answer.graph_workdir`` each choice also gets the readout of
:class:`racer_jax.answer.graph_head.PathGraphEncoder` over the question's
graph of refined paths (QA-GNN's joint graph), trained with the head.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from racer_jax.answer import graph_head


class ChoiceHead(nn.Module):
  hidden: int = 256
  dropout: float = 0.1
  # with a graph: the graph encoder's width and depth
  graph_hidden: int = 32
  graph_layers: int = 2

  @nn.compact
  def __call__(self, q, c, k, e=None, deterministic: bool = True,
               graph=None):
    """q: [B, d]; c, k: [B, C, d]; e: [B, C, EVIDENCE_DIM] or None; graph:
    :meth:`racer_jax.answer.path_graph.PathGraphs.take` arrays or None ->
    scores [B, C]."""
    if graph is not None:  # the paths' graph, read the QA-GNN way
      g = graph_head.PathGraphEncoder(
          self.graph_hidden, self.graph_layers, self.dropout,
          name="graph")(graph, q, c, deterministic)
      e = g if e is None else jnp.concatenate([e, g], -1)
    q = jnp.broadcast_to(q[:, None], c.shape)
    sims = jnp.stack([jnp.sum(q * c, -1), jnp.sum(c * k, -1),
                      jnp.sum(q * k, -1)], axis=-1)
    parts = [q, c, k, q * c, c * k, q * k, sims]
    x = jnp.concatenate(parts + ([] if e is None else [e]), axis=-1)
    x = nn.gelu(nn.Dense(self.hidden, name="hidden")(x))
    x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
    return nn.Dense(1, name="score")(x)[..., 0]


def head_logits(model: ChoiceHead, params, features, choice_mask, rng=None,
                graph=None):
  """features: ``(q [B, d], c [B, C, d], k [B, C, d])``, optionally with
  ``e [B, C, EVIDENCE_DIM]``; graph: the paths' graph arrays or None ->
  [B, C] with padded choices at -1e9."""
  q, c, k, *e = features
  scores = model.apply({"params": params}, q, c, k, e[0] if e else None,
                       deterministic=rng is None, graph=graph,
                       rngs=None if rng is None else {"dropout": rng})
  return jnp.where(choice_mask, scores, -1e9)


def encode_features(encoder, questions, choices, knowledge, num_choices):
  """Frozen vectors of a split: ``(q [Q, d], c [Q, C, d], k [Q, C, d],
  choice_mask [Q, C])``. Texts are encoded once each (duplicates shared);
  empty knowledge is a zero vector."""
  texts = sorted({t for t in questions} |
                 {t for cs in choices for t in cs} |
                 {t for ks in (knowledge or []) for t in ks if t})
  index = {t: i for i, t in enumerate(texts)}
  vectors = encoder.encode(texts) if texts else np.zeros((0, encoder.dim))
  d = vectors.shape[1]
  n = len(questions)
  q = vectors[[index[t] for t in questions]].astype(np.float32)
  c = np.zeros((n, num_choices, d), np.float32)
  k = np.zeros((n, num_choices, d), np.float32)
  mask = np.zeros((n, num_choices), bool)
  for i, cs in enumerate(choices):
    for j, text in enumerate(cs):
      c[i, j] = vectors[index[text]]
      mask[i, j] = True
      kt = knowledge[i][j] if knowledge else ""
      if kt:
        k[i, j] = vectors[index[kt]]
  return q, c, k, mask


EVIDENCE_DIM = 9
LOG_PROB_FLOOR = -10.0  # best log-probabilities are clipped here


def evidence_dim(choice_head: bool) -> int:
  """The evidence features per choice: :data:`EVIDENCE_DIM`, plus one
  with the refiner's choice head (``answer.evidence_choice_head``)."""
  return EVIDENCE_DIM + int(bool(choice_head))


def evidence_features(evidence, num_choices: int,
                      choice_head: bool = False) -> np.ndarray:
  """float32 [Q, num_choices, evidence_dim(choice_head)] from per
  question, per choice :func:`racer_jax.agents.graph_agent.choice_evidence`
  dicts. Per choice:

  0. reach frequency (reached / walks);
  1. any walk reached it;
  2. best reaching log-probability, clipped at ``LOG_PROB_FLOOR`` and
     mapped to [0, 1] (0: none reached);
  3. reach frequency minus the question's best;
  4. it is the walker's pick (most reached, ties by log-probability; all
     tied choices get 1; none when nothing was reached);
  5. best log-probability feature minus the question's best;
  6. it has a distinct path the refiner scored;
  7. softmax over the question's choices of the best refiner scores
     (choices without a path get 0);
  8. distinct paths / walks (how varied its walks were);
  9. with ``choice_head``: the refiner's choice-head probability that the
     paths support it (:mod:`racer_jax.refiner.choice_scorer`).
  Padding choices are zeros."""
  out = np.zeros((len(evidence), num_choices, evidence_dim(choice_head)),
                 np.float32)
  for i, choices in enumerate(evidence):
    n = min(len(choices), num_choices)
    if choice_head:
      if any("choice_prob" not in choices[j] for j in range(n)):
        raise ValueError(
            "answer.evidence_choice_head=True but the evidence has no "
            "choice_prob: answer.evidence_workdir must be a refiner run "
            "trained with refiner.choice_head=True")
      out[i, :n, EVIDENCE_DIM] = [choices[j]["choice_prob"]
                                  for j in range(n)]
    walks = np.array([max(choices[j]["walks"], 1) for j in range(n)], float)
    reach = np.array([choices[j]["reached"] for j in range(n)]) / walks
    lp = np.array([0.0 if choices[j]["best_log_prob"] is None else
                   1.0 - max(choices[j]["best_log_prob"], LOG_PROB_FLOOR)
                   / LOG_PROB_FLOOR for j in range(n)])
    has = np.array([choices[j]["best_score"] is not None for j in range(n)])
    score = np.array([choices[j]["best_score"] or 0.0 for j in range(n)])
    soft = np.zeros(n)
    if has.any():
      z = np.where(has, score - score[has].max(), -np.inf)
      soft = np.exp(z) / np.exp(z).sum()
    pick = np.zeros(n)
    if n and reach.max() > 0:
      top = reach == reach.max()
      pick = (top & (np.where(top, lp, -1) == np.where(top, lp, -1).max())
              ).astype(float)
    distinct = np.array([choices[j]["distinct"] for j in range(n)]) / walks
    if n:
      out[i, :n, :EVIDENCE_DIM] = np.stack([
          reach, reach > 0, lp, reach - reach.max(), pick, lp - lp.max(),
          has, soft, distinct], axis=-1)
  return out
