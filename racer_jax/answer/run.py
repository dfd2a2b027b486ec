"""The registered answer models' trainers and predictors
(:data:`racer_jax.runs.registry.ANSWER_MODELS`).

* ``cross_encoder``: the fine-tuned cross-encoder over ``question ⊕ choice ⊕
  knowledge`` (:mod:`racer_jax.answer.cross_encoder`):
  :func:`train_cross_encoder`, :class:`CrossEncoderPredictor`.
* ``frozen_head``: a small head over frozen MiniLM vectors of question,
  choice and knowledge (:mod:`racer_jax.answer.choice_head`), the vectors
  encoded once and cached in the workdir; with ``answer.evidence_workdir``
  it also reads each choice's walker evidence
  (:func:`choice_head.evidence_features`), with ``answer.graph_workdir`` the
  graph of the refined paths (:mod:`racer_jax.answer.path_graph`, read by
  :mod:`racer_jax.answer.graph_head`), built once and cached in the workdir:
  :func:`train_frozen_head`, :class:`FrozenHeadPredictor`.

A trainer returns ``(last logged metrics, every update done)``; a predictor
restores an answer run's newest checkpoint and gives choice probabilities
for :class:`racer_jax.agents.answer_agent.AnswerRequest` s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import jax
import numpy as np

from racer_jax.answer import choice_head, cross_encoder as ce, inputs, path_graph, update
from racer_jax.data import validation
from racer_jax.runs.checkpoints import Checkpointer, restore_run, restore_template
from racer_jax.runs.update_loop import run_stage_updates
from racer_jax.text.minilm import MiniLMEncoder


def train_cross_encoder(config, data_dir, workdir: Path, *, progress: bool,
                        log: Callable[[str], None],
                        stop_after: int | None) -> tuple[dict, bool]:
  """The cross-encoder's trainer (``answer.model=cross_encoder``):
  ``(last logged metrics, every update done)``."""
  a, t = config.answer, config.train
  eval_split = config.eval.split
  tokenizer = ce.ChoiceTokenizer(config.text.model_dir or None,
                                 max_length=a.max_length)
  knowledge = inputs.knowledge_for(config, data_dir, [t.split, eval_split],
                                   progress, log, cache_dir=workdir)
  data = {s: inputs.load_answer_data(config, data_dir, s, tokenizer,
                                     knowledge[s] if knowledge else None)
          for s in {t.split, eval_split}}
  train_data = data[t.split]
  # the validation slice is kept out of training (the critic is fitted on it)
  train_rows, val_rows = validation.split_rows(config,
                                               len(train_data.examples))
  val_data = train_data.subset(val_rows)
  n, bs = len(train_rows), a.batch_size
  per_epoch = -(-n // bs)
  total = max(1, int(round(a.epochs * per_epoch)))
  model, optimizer, state = update.create_cross_encoder_state(
      config, tokenizer, total)
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state = restored[0]
    log(f"resuming from step {int(state.step)}")
  start = int(state.step)
  log(f"answer model: {n} training questions ({len(val_rows)} held out for "
      f"validation), {total} updates of {bs}, knowledge "
      f"{inputs.knowledge_sources(config) if knowledge else 'off'}")
  step_fn = update.make_cross_encoder_step(model, optimizer)
  orders = {}

  def rows_for(step):
    epoch, i = divmod(step, per_epoch)
    if epoch not in orders:
      orders[epoch] = np.asarray(jax.random.permutation(
          jax.random.fold_in(jax.random.PRNGKey(config.seed), epoch), n))
    rows = train_rows[orders[epoch][i * bs:(i + 1) * bs]]
    return np.concatenate([rows, -np.ones(bs - len(rows), int)])

  def one_update(state, step):
    return step_fn(state, *train_data.batch(tokenizer, rows_for(step)))

  def evaluate(state, step):
    figures = {}
    for name, split_data in [(eval_split, data[eval_split]),
                             ("validation", val_data)]:
      if name == "validation" and not val_rows.size:
        continue
      probs = update.cross_encoder_probs(model, state.params, split_data,
                                         tokenizer, config.eval.batch_size)
      inputs.write_predictions(
          workdir / "eval" / f"{name}_step{step}.answer.jsonl", split_data,
          probs)
      key = "accuracy" if name == eval_split else "validation_accuracy"
      figures[key] = inputs.accuracy(probs, split_data.gold)
    return figures

  _, last, finished = run_stage_updates(
      state, one_update, config=config, workdir=workdir, ckpt=ckpt,
      start=start, total=total, stop_after=stop_after,
      record=lambda done: {"stage": "answer"}, evaluate=evaluate,
      eval_every=total, progress=progress, desc="train answer")
  return last, finished


def train_frozen_head(config, data_dir, workdir: Path, *, progress: bool,
                log: Callable[[str], None],
                stop_after: int | None) -> tuple[dict, bool]:
  """The frozen head's trainer (``answer.model=frozen_head``): its inputs
  (knowledge text, walker evidence, the paths' graph — those the config
  names) for the training and evaluation splits, then :func:`train_head`."""
  splits = [config.train.split, config.eval.split]
  knowledge = inputs.knowledge_for(config, data_dir, splits, progress, log,
                                   cache_dir=workdir)
  evidence = inputs.evidence_for(config, data_dir, splits, progress, log)
  graph_paths = inputs.graph_paths_for(config, data_dir, splits, progress,
                                       log)
  return train_head(config, data_dir, workdir, knowledge=knowledge,
                    evidence=evidence, graph_paths=graph_paths,
                    progress=progress, log=log, stop_after=stop_after)


def train_head(config, data_dir, workdir, *, knowledge, evidence=None,
               graph_paths=None, progress: bool = True,
               log: Callable[[str], None] = print,
               stop_after: int | None = None) -> tuple[dict, bool]:
  """``(last logged metrics, every update done)``. ``knowledge``: ``{split:
  [Q][C] text}`` or None; ``evidence``: ``{split: [Q][C] choice_evidence}``
  (with ``answer.evidence_workdir``) or None; ``graph_paths``: ``{split:
  [Q][C] [RetrievedPath]}`` (with ``answer.graph_workdir``) or None."""
  workdir = Path(workdir)
  a, t = config.answer, config.train
  encoder = MiniLMEncoder(config.text.model_dir or None)
  c = config.batch.num_choices
  feats, gold, graphs = {}, {}, {}
  for split in {t.split, config.eval.split}:
    examples = inputs.load_examples(config, data_dir, split)
    feats[split] = inputs.cached_features(
        workdir / f"features.{split}.npz", encoder, examples,
        knowledge[split] if knowledge else None, c)
    if evidence is not None:
      feats[split] = feats[split][:3] + (choice_head.evidence_features(
          evidence[split], c, a.evidence_choice_head),
                                          ) + feats[split][3:]
    if graph_paths is not None:
      graphs[split] = path_graph.cached_graphs(
          workdir / f"graph.{split}.npz", graph_paths[split], c, encoder)
    gold[split] = np.array([-1 if e.answer_index is None else
                            e.answer_index for e in examples], np.int32)
  *features, mask = feats[t.split]
  q = features[0]
  # the validation slice is kept out of training (the critic is fitted on it)
  train_rows, val_rows = validation.split_rows(config, len(q))
  n, bs = len(train_rows), a.head_batch_size
  per_epoch = -(-n // bs)
  total = max(1, int(round(a.head_epochs * per_epoch)))
  model, optimizer, state = update.create_head_state(config, q.shape[1],
                                                    total)
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state = restored[0]
  start = int(state.step)
  log(f"frozen-head answer model: {n} questions ({len(val_rows)} held out "
      f"for validation), {total} updates of {bs}")

  def graph_of(split, rows):
    return graphs[split].take(rows) if graphs else None

  step_fn = update.make_head_step(model, optimizer)
  orders = {}

  def one_update(state, step):
    epoch, i = divmod(step, per_epoch)
    if epoch not in orders:  # one permutation per epoch, not per update
      orders[epoch] = np.asarray(jax.random.permutation(
          jax.random.fold_in(jax.random.PRNGKey(config.seed), epoch), n))
    rows = train_rows[orders[epoch][i * bs:(i + 1) * bs]]
    g = gold[t.split][rows]
    return step_fn(state, tuple(x[rows] for x in features), mask[rows], g,
                   graph_of(t.split, rows))

  forward = update.make_head_forward(model)

  def accuracy_on(params, split, rows=None):
    *ins, em = (x if rows is None else x[rows] for x in feats[split])
    every = np.arange(len(em)) if rows is None else rows
    probs = np.concatenate([np.asarray(forward(
        params, tuple(x[i:i + 512] for x in ins), em[i:i + 512],
        graph_of(split, every[i:i + 512])))
                            for i in range(0, len(em), 512)])
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

  _, last, finished = run_stage_updates(
      state, one_update, config=config, workdir=workdir, ckpt=ckpt,
      start=start, total=total, stop_after=stop_after,
      record=lambda done: {"stage": "answer", "model": "frozen_head"},
      evaluate=evaluate, eval_every=total, progress=progress,
      desc="train answer head")
  return last, finished


class CrossEncoderPredictor:
  """The fine-tuned cross-encoder over ``question ⊕ choice ⊕ knowledge``,
  batched on the device."""

  batch_size = 32

  def __init__(self, config, workdir: Path,
               log: Callable[[str], None] = print):
    self.tokenizer = ce.ChoiceTokenizer(config.text.model_dir or None,
                                        max_length=config.answer.max_length)
    self.model, _, template = restore_template(
        update.create_cross_encoder_state, config, self.tokenizer, 1)
    self.state, _, self.step = restore_run(workdir, template, "answer",
                                           log=log)
    self.num_choices = config.batch.num_choices

  def probs(self, requests) -> np.ndarray:
    """float32 [Q, num_choices]."""
    tokens = [self.tokenizer.encode(r.question, r.choices, r.knowledge)
              for r in requests]
    data = inputs.AnswerData(
        examples=requests, tokens=tokens,
        gold=-np.ones(len(requests), np.int32),
        num_choices=self.num_choices, knowledge=None)
    return update.cross_encoder_probs(self.model, self.state.params, data,
                                      self.tokenizer, self.batch_size)


class FrozenHeadPredictor:
  """The small head over frozen MiniLM vectors of question, choice and
  knowledge (with the walker's evidence and the paths' graph when the run
  read them)."""

  def __init__(self, config, workdir: Path,
               log: Callable[[str], None] = print):
    self.encoder = MiniLMEncoder(config.text.model_dir or None)
    self.model, _, template = restore_template(
        update.create_head_state, config, self.encoder.dim, 1)
    self.state, _, self.step = restore_run(workdir, template, "answer",
                                           log=log)
    a = config.answer
    self.num_choices = config.batch.num_choices
    self._reads = (bool(a.evidence_workdir), bool(a.evidence_choice_head),
                   bool(a.graph_workdir))

  def probs(self, requests) -> np.ndarray:
    """float32 [Q, num_choices]."""
    uses_evidence, evidence_choice_head, uses_graph = self._reads
    return update.head_probs(
        self.model, self.state.params, self.encoder, requests,
        self.num_choices, uses_evidence, evidence_choice_head, uses_graph)
