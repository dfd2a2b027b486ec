"""The fast answer model (``--config.answer.model=frozen_head``): a small
head over frozen MiniLM vectors of question, choice and knowledge
(:mod:`racer_jax.text.choice_head`). Same data, knowledge and evaluation as
the cross-encoder stage; the vectors are encoded once and cached in the
workdir. With ``answer.evidence_workdir`` the head also reads each choice's
whole-graph walker evidence (:func:`choice_head.evidence_features`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from racer_jax.data import datasets, qa, validation
from racer_jax.driver.checkpoints import Checkpointer
from racer_jax.driver.loop import run_updates
from racer_jax.driver.metrics import MetricWriter
from racer_jax.memory import edge_memory
from racer_jax.rl import train as train_lib
from racer_jax.text import choice_head


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
  model = choice_head.ChoiceHead(hidden=a.head_hidden, dropout=a.dropout)
  schedule = optax.warmup_cosine_decay_schedule(
      0.0, a.head_learning_rate, max(1, num_steps // 10), max(num_steps, 2))
  optimizer = optax.adamw(schedule, weight_decay=a.weight_decay)
  rng = jax.random.PRNGKey(config.seed)
  z = jnp.zeros((1, dim))
  e = (jnp.zeros((1, 1, choice_head.EVIDENCE_DIM))
       if a.get("evidence_workdir", "") else None)
  params = model.init(jax.random.fold_in(rng, 0x4ead), z, z[:, None],
                      z[:, None], e)["params"]
  state = train_lib.TrainState(params=params, opt_state=optimizer.init(params),
                               step=jnp.zeros((), jnp.int32), rng=rng,
                               memory=edge_memory.empty(1))  # unused
  return model, optimizer, state


def train(config, data_dir, workdir, *, knowledge, evidence=None,
          progress: bool = True, log: Callable[[str], None] = print,
          stop_after: int | None = None) -> tuple[dict, bool]:
  """``(last logged metrics, every update done)``. ``knowledge``: ``{split:
  [Q][C] text}`` or None; ``evidence``: ``{split: [Q][C] choice_evidence}``
  (with ``answer.evidence_workdir``) or None."""
  from racer_jax.text.minilm import MiniLMEncoder
  workdir = Path(workdir)
  a, t = config.answer, config.train
  encoder = MiniLMEncoder(config.text.model_dir or None)
  c = config.batch.num_choices
  feats, gold = {}, {}
  for split in {t.split, config.eval.split}:
    path = datasets.split_path(config, split,
                               datasets.resolve_data_dir(data_dir))
    examples, _ = qa.load_jsonl(path, on_bad_line=config.data.on_bad_line)
    feats[split] = cached_features(
        workdir / f"features.{split}.npz", encoder, examples,
        knowledge[split] if knowledge else None, c)
    if evidence is not None:
      feats[split] = feats[split][:3] + (choice_head.evidence_features(
          evidence[split], c),) + feats[split][3:]
    gold[split] = np.array([-1 if e.answer_index is None else
                            e.answer_index for e in examples], np.int32)
  *inputs, mask = feats[t.split]
  q = inputs[0]
  # the validation slice is kept out of training (the critic is fitted on it)
  train_rows, val_rows = validation.split_rows(config, len(q))
  n, bs = len(train_rows), a.head_batch_size
  per_epoch = -(-n // bs)
  total = max(1, int(round(a.head_epochs * per_epoch)))
  model, optimizer, state = create_state(config, q.shape[1], total)
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state = restored[0]
  start = int(state.step)
  log(f"frozen-head answer model: {n} questions ({len(val_rows)} held out "
      f"for validation), {total} updates of {bs}")

  @jax.jit
  def step_fn(state, features, choice_mask, gold_b):
    rng = jax.random.fold_in(state.rng, state.step)

    def loss_of(params):
      logits = choice_head.head_logits(model, params, features, choice_mask,
                                       rng)
      ce = optax.softmax_cross_entropy_with_integer_labels(
          logits, jnp.maximum(gold_b, 0))
      keep = gold_b >= 0
      loss = jnp.sum(jnp.where(keep, ce, 0.0)) / jnp.maximum(keep.sum(), 1)
      return loss, {"loss": loss}
    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(
        state.params)
    new_state, guard = train_lib.apply_guarded(state, optimizer, loss, grads)
    return new_state, dict(metrics, **guard)

  orders = {}

  def one_update(state, step):
    epoch, i = divmod(step, per_epoch)
    if epoch not in orders:  # one permutation per epoch, not per update
      orders[epoch] = np.asarray(jax.random.permutation(
          jax.random.fold_in(jax.random.PRNGKey(config.seed), epoch), n))
    rows = train_rows[orders[epoch][i * bs:(i + 1) * bs]]
    g = gold[t.split][rows]
    return step_fn(state, tuple(x[rows] for x in inputs), mask[rows], g)

  forward = jax.jit(lambda p, f, m: jax.nn.softmax(
      choice_head.head_logits(model, p, f, m), -1))

  def accuracy_on(params, split, rows=None):
    *ins, em = (x if rows is None else x[rows] for x in feats[split])
    probs = np.asarray(forward(params, tuple(ins), em))
    g = gold[split] if rows is None else gold[split][rows]
    keep = g >= 0
    return float(np.mean(np.argmax(probs[keep], -1) == g[keep]))

  def evaluate(state, step):
    del step
    figures = {"accuracy": accuracy_on(state.params, config.eval.split)}
    if val_rows.size:
      figures["validation_accuracy"] = accuracy_on(state.params, t.split,
                                                   val_rows)
    return figures

  end = total if stop_after is None else min(total, start + stop_after)
  writer = MetricWriter(workdir, enabled=jax.process_index() == 0)
  state, last = run_updates(
      state, one_update, start=start, end=end, total=total,
      ckpt=ckpt, writer=writer, log_every=t.log_every,
      checkpoint_every=t.checkpoint_every,
      record=lambda done: {"step": done, "stage": "answer",
                           "model": "frozen_head",
                           "config": json.loads(config.to_json())},
      evaluate=evaluate, eval_every=total, progress=progress,
      desc="train answer head")
  writer.close()
  ckpt.close()
  return last, end == total


def head_probs(model, params, encoder, requests, num_choices,
               uses_evidence: bool = False) -> np.ndarray:
  """Choice probabilities [Q, num_choices] for AnswerRequests (with
  ``uses_evidence``, each must carry its walker ``evidence``)."""
  q, c, k, mask = choice_head.encode_features(
      encoder, [r.question for r in requests], [r.choices for r in requests],
      [r.knowledge or [""] * len(r.choices) for r in requests], num_choices)
  features = (q, c, k)
  if uses_evidence:
    if any(r.evidence is None for r in requests):
      raise ValueError("this answer run reads the walker's evidence "
                       "(answer.evidence_workdir) but a request has none")
    features += (choice_head.evidence_features(
        [r.evidence for r in requests], num_choices),)
  logits = choice_head.head_logits(model, params, features, mask)
  return np.asarray(jax.nn.softmax(logits, -1))

