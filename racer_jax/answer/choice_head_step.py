"""The frozen-head answer model's features, train state and forward.

MiniLM vectors of question, choice and knowledge are encoded once and cached
(:func:`cached_features`); :func:`create_state` builds the small head of
:mod:`racer_jax.answer.choice_head` with AdamW; :func:`head_probs` scores
AnswerRequests (with the walker's evidence when the run reads it). The stage
that trains it is :mod:`racer_jax.train.answer_head_stage`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from racer_jax.answer import choice_head, path_graph
from racer_jax.memory import edge_memory
from racer_jax.walker import update as train_lib


def cached_features(path: Path, encoder, examples, knowledge, num_choices):
  """:func:`choice_head.encode_features`, reused from ``path`` when it was
  made from exactly these texts."""
  texts = json.dumps([[e.stem, list(e.choices)] for e in examples] +
                     [knowledge or []])
  digest = hashlib.sha256(texts.encode()).hexdigest()
  if path.exists():
    with np.load(path) as f:
      if str(f["digest"]) == digest:
        return f["q"], f["c"], f["k"], f["mask"]
  q, c, k, mask = choice_head.encode_features(
      encoder, [e.stem for e in examples], [list(e.choices) for e in examples],
      knowledge, num_choices)
  tmp = path.with_suffix(".tmp.npz")
  np.savez(tmp, q=q, c=c, k=k, mask=mask, digest=digest)
  tmp.replace(path)
  return q, c, k, mask


def create_state(config, dim: int, num_steps: int):
  a = config.answer
  model = choice_head.ChoiceHead(hidden=a.head_hidden, dropout=a.dropout,
                                 graph_hidden=a.graph_hidden,
                                 graph_layers=a.graph_layers)
  schedule = optax.warmup_cosine_decay_schedule(
      0.0, a.head_learning_rate, max(1, num_steps // 10), max(num_steps, 2))
  optimizer = optax.adamw(schedule, weight_decay=a.weight_decay)
  rng = jax.random.PRNGKey(config.seed)
  z = jnp.zeros((1, dim))
  e = (jnp.zeros((1, 1, choice_head.evidence_dim(
      a.evidence_choice_head)))
       if a.evidence_workdir else None)
  c = config.batch.num_choices
  graph = (path_graph.empty(c, dim).take([0])
           if a.graph_workdir else None)
  zc = jnp.zeros((1, c, dim))
  if e is not None:
    e = jnp.broadcast_to(e, (1, c, e.shape[-1]))
  params = model.init(jax.random.fold_in(rng, 0x4ead), z, zc, zc, e,
                      graph=graph)["params"]
  state = train_lib.TrainState(params=params, opt_state=optimizer.init(params),
                               step=jnp.zeros((), jnp.int32), rng=rng,
                               memory=edge_memory.empty(1))  # unused
  return model, optimizer, state


def head_probs(model, params, encoder, requests, num_choices,
               uses_evidence: bool = False,
               evidence_choice_head: bool = False,
               uses_graph: bool = False) -> np.ndarray:
  """Choice probabilities [Q, num_choices] for AnswerRequests (with
  ``uses_evidence``, each must carry its walker ``evidence``, with the
  refiner's choice-head probabilities when ``evidence_choice_head``; with
  ``uses_graph``, its refined ``paths``)."""
  q, c, k, mask = choice_head.encode_features(
      encoder, [r.question for r in requests], [r.choices for r in requests],
      [r.knowledge or [""] * len(r.choices) for r in requests], num_choices)
  features = (q, c, k)
  if uses_evidence:
    if any(r.evidence is None for r in requests):
      raise ValueError("this answer run reads the walker's evidence "
                       "(answer.evidence_workdir) but a request has none")
    features += (choice_head.evidence_features(
        [r.evidence for r in requests], num_choices, evidence_choice_head),)
  graph = None
  if uses_graph:
    if any(r.paths is None for r in requests):
      raise ValueError("this answer run reads the paths' graph "
                       "(answer.graph_workdir) but a request has no paths")
    graph = path_graph.build([r.paths for r in requests], num_choices,
                             encoder).take(np.arange(len(requests)))
  logits = choice_head.head_logits(model, params, features, mask,
                                   graph=graph)
  return np.asarray(jax.nn.softmax(logits, -1))
