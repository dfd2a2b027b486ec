"""The answer models' train states, jitted updates and forwards.

The cross-encoder (:mod:`racer_jax.answer.cross_encoder`) starts from
pretrained BERT weights with AdamW under warmup and cosine decay
(:func:`create_cross_encoder_state`); :func:`make_cross_encoder_step` is one
jitted update (cross-entropy over the choices, the NaN guard, the state
donated); :func:`cross_encoder_probs` scores a split in length order with few
padded shapes. The frozen head (:mod:`racer_jax.answer.choice_head`) over
MiniLM vectors has its own state, step and forward
(:func:`create_head_state`, :func:`make_head_step`, :func:`head_probs`).
Their trainers and predictors are in :mod:`racer_jax.answer.run`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from racer_jax.answer import choice_head, cross_encoder as ce, path_graph
from racer_jax.memory import edge_memory
from racer_jax.walker import update as train_lib


def create_cross_encoder_state(config, tokenizer, num_steps: int):
  """``(model, optimizer, fresh TrainState)`` with pretrained BERT."""
  a = config.answer
  model = ce.CrossEncoder(tokenizer.config, dropout=a.dropout)
  schedule = optax.warmup_cosine_decay_schedule(
      0.0, a.learning_rate, max(1, int(a.warmup_fraction * num_steps)),
      max(num_steps, 2), end_value=0.0)
  optimizer = optax.chain(
      optax.clip_by_global_norm(config.train.grad_clip),
      optax.adamw(schedule, weight_decay=a.weight_decay))
  rng = jax.random.PRNGKey(config.seed)
  params = ce.init_params(model, config.text.model_dir or None,
                          jax.random.fold_in(rng, 0xa5))
  state = train_lib.TrainState(params=params, opt_state=optimizer.init(params),
                               step=jnp.zeros((), jnp.int32), rng=rng,
                               memory=edge_memory.empty(1))  # unused
  return model, optimizer, state


def make_cross_encoder_step(model, optimizer):
  """The jitted update ``(state, tokens, choice_mask, gold, example_mask) ->
  (state, metrics)``: cross-entropy over the choices, the NaN guard, the
  state donated."""
  def step(state, tokens, choice_mask, gold, example_mask):
    rng = jax.random.fold_in(state.rng, state.step)

    def loss_of(params):
      logits = ce.choice_logits(model, params, tokens, choice_mask, rng)
      loss = ce.choice_loss(logits, gold, example_mask)
      keep = example_mask & (gold >= 0)
      acc = jnp.sum((jnp.argmax(logits, -1) == gold) & keep) / jnp.maximum(
          keep.sum(), 1)
      return loss, {"loss": loss, "accuracy": acc}

    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(
        state.params)
    new_state, guard = train_lib.apply_guarded(state, optimizer, loss, grads)
    return new_state, dict(metrics, **guard)

  return jax.jit(step, donate_argnums=(0,))


def cross_encoder_probs(model, params, data, tokenizer,
                        batch_size: int) -> np.ndarray:
  """Choice probabilities float32 [Q, C] of the questions of ``data``
  (:class:`racer_jax.answer.inputs.AnswerData`) (0 for missing choices);
  questions run in order of length to keep padding small, a short last
  batch (or a loop round with few questions left) padded only to the next
  power of two (≥ 8), so few shapes compile and little is wasted."""
  forward = _forward(model)
  order = np.argsort([max(map(len, t[0])) for t in data.tokens],
                     kind="stable")
  probs = np.zeros((len(data.examples), data.num_choices), np.float32)
  for start in range(0, len(order), batch_size):
    rows = order[start:start + batch_size]
    width = min(batch_size, max(8, 1 << (len(rows) - 1).bit_length()))
    padded = np.concatenate([rows, -np.ones(width - len(rows), int)])
    tokens, choice_mask, _, _ = data.batch(tokenizer, padded)
    out = np.asarray(forward(params, tokens, choice_mask))
    probs[rows] = out[:len(rows)]
  return probs


_FORWARDS = {}


def _forward(model):
  if model not in _FORWARDS:
    _FORWARDS[model] = jax.jit(lambda p, tokens, cm: jax.nn.softmax(
        ce.choice_logits(model, p, tokens, cm), axis=-1))
  return _FORWARDS[model]


def create_head_state(config, dim: int, num_steps: int):
  """``(model, optimizer, fresh TrainState)`` of the frozen head over
  ``dim``-wide vectors."""
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


def make_head_step(model, optimizer):
  """The jitted update ``(state, features, choice_mask [B, C], gold [B],
  graph | None) -> (state, metrics)``: cross-entropy over the choices
  (unlabeled rows, gold -1, left out), the NaN guard."""
  def step(state, features, choice_mask, gold_b, graph):
    rng = jax.random.fold_in(state.rng, state.step)

    def loss_of(params):
      logits = choice_head.head_logits(model, params, features, choice_mask,
                                       rng, graph=graph)
      xent = optax.softmax_cross_entropy_with_integer_labels(
          logits, jnp.maximum(gold_b, 0))
      keep = gold_b >= 0
      loss = jnp.sum(jnp.where(keep, xent, 0.0)) / jnp.maximum(keep.sum(), 1)
      return loss, {"loss": loss}
    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(
        state.params)
    new_state, guard = train_lib.apply_guarded(state, optimizer, loss, grads)
    return new_state, dict(metrics, **guard)

  return jax.jit(step)


def make_head_forward(model):
  """Jitted ``(params, features, choice_mask, graph | None) -> choice
  probabilities [B, C]``."""
  return jax.jit(lambda p, f, m, graph: jax.nn.softmax(
      choice_head.head_logits(model, p, f, m, graph=graph), -1))


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
