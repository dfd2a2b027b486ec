"""The cross-encoder answer model's data, train state, jitted step and forward.

A split is tokenized once into :class:`AnswerData` (per question, per choice
``question ⊕ choice ⊕ knowledge``, :mod:`racer_jax.answer.cross_encoder`);
:func:`create_state` builds the model from pretrained BERT weights with AdamW
under warmup and cosine decay; :func:`make_answer_step` is one jitted update
(cross-entropy over the choices, the NaN guard, the state donated);
:func:`predict` scores a split in length order with few padded shapes.
The stage that trains it is :mod:`racer_jax.train.answer_stage`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from racer_jax.answer import cross_encoder as ce
from racer_jax.data import datasets, qa
from racer_jax.memory import edge_memory
from racer_jax.walker import update as train_lib


@dataclasses.dataclass
class AnswerData:
  """A split, tokenized: per question ``(ids, type_ids)`` per choice."""
  examples: list
  tokens: list
  gold: np.ndarray        # int32 [Q], -1 unlabeled
  num_choices: int
  knowledge: list | None  # [Q][C] sentences, None without knowledge

  def batch(self, tokenizer, rows):
    """(tokens [B, C, T] x3, choice_mask [B, C], gold [B], mask [B]);
    ``rows`` may hold -1 for padding questions."""
    rows = list(rows)
    real = [self.tokens[r] if r >= 0 else ([], []) for r in rows]
    tokens = tokenizer.pad(real, self.num_choices)
    choice_mask = tokens[2][:, :, 0]
    gold = np.array([self.gold[r] if r >= 0 else -1 for r in rows],
                    np.int32)
    return tokens, choice_mask, gold, np.array(rows) >= 0

  def subset(self, rows) -> "AnswerData":
    """The questions ``rows`` (e.g. the validation slice), in that order."""
    rows = [int(r) for r in rows]
    return AnswerData([self.examples[r] for r in rows],
                      [self.tokens[r] for r in rows], self.gold[rows],
                      self.num_choices,
                      [self.knowledge[r] for r in rows]
                      if self.knowledge else None)


def load_answer_data(config, data_dir, split: str, tokenizer,
                     knowledge=None) -> AnswerData:
  path = datasets.split_path(config, split, datasets.resolve_data_dir(
      data_dir))
  examples = load_examples(config, data_dir, split)
  c = config.batch.num_choices
  too_many = [e.id for e in examples if len(e.choices) > c]
  if too_many:
    raise ValueError(f"{path}: {len(too_many)} questions have more than "
                     f"batch.num_choices={c} choices (e.g. {too_many[0]})")
  tokens = [tokenizer.encode(e.stem, e.choices,
                             knowledge[i] if knowledge else None)
            for i, e in enumerate(examples)]
  gold = np.array([-1 if e.answer_index is None else e.answer_index
                   for e in examples], np.int32)
  return AnswerData(examples, tokens, gold, c, knowledge)


def load_examples(config, data_dir, split: str) -> list:
  path = datasets.split_path(config, split, datasets.resolve_data_dir(
      data_dir))
  return qa.load_jsonl(path, on_bad_line=config.data.on_bad_line)[0]


def create_state(config, tokenizer, num_steps: int):
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


def make_answer_step(model, optimizer):
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


def predict(model, params, data: AnswerData, tokenizer,
            batch_size: int) -> np.ndarray:
  """Choice probabilities float32 [Q, C] (0 for missing choices);
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


def accuracy(probs: np.ndarray, gold: np.ndarray) -> float:
  keep = gold >= 0
  return float(np.mean(np.argmax(probs[keep], -1) == gold[keep])) if (
      keep.any()) else 0.0


def write_predictions(path: Path, data: AnswerData, probs: np.ndarray):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    for i, e in enumerate(data.examples):
      f.write(json.dumps({
          "id": e.id, "gold": int(data.gold[i]),
          "prediction": int(np.argmax(probs[i])),
          "probs": [round(float(p), 5) for p in probs[i][:len(e.choices)]],
          **({"knowledge": data.knowledge[i]} if data.knowledge else {}),
      }) + "\n")
