"""The fast answer model (``--config.answer.model=frozen_head``): a small
head over frozen MiniLM vectors of question, choice and knowledge
(:mod:`racer_jax.answer.choice_head`). Same data, knowledge and evaluation as
the cross-encoder stage; the vectors are encoded once and cached in the
workdir. With ``answer.evidence_workdir`` the head also reads each choice's
walker evidence (:func:`choice_head.evidence_features`); with
``answer.graph_workdir`` the graph of the refined paths
(:mod:`racer_jax.answer.path_graph`, read by
:mod:`racer_jax.answer.graph_head`), built once and cached in the workdir."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from racer_jax.agents import answer_inputs
from racer_jax.answer import choice_head, path_graph
from racer_jax.answer.choice_head_step import cached_features, create_state
from racer_jax.data import datasets, qa, validation
from racer_jax.walker import update as train_lib
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.update_loop import run_stage_updates
from racer_jax.text.minilm import MiniLMEncoder


def train_stage(config, data_dir, workdir: Path, *, progress: bool,
                log: Callable[[str], None],
                stop_after: int | None) -> tuple[dict, bool]:
  """The frozen head's trainer (``answer.model=frozen_head``): its inputs
  (knowledge text, walker evidence, the paths' graph — those the config
  names) for the training and evaluation splits, then :func:`train`."""
  splits = [config.train.split, config.eval.split]
  knowledge = answer_inputs.knowledge_for(config, data_dir, splits, progress,
                                          log, cache_dir=workdir)
  evidence = answer_inputs.evidence_for(config, data_dir, splits, progress,
                                        log)
  graph_paths = answer_inputs.graph_paths_for(config, data_dir, splits,
                                              progress, log)
  return train(config, data_dir, workdir, knowledge=knowledge,
               evidence=evidence, graph_paths=graph_paths,
               progress=progress, log=log, stop_after=stop_after)


def train(config, data_dir, workdir, *, knowledge, evidence=None,
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
    path = datasets.split_path(config, split,
                               datasets.resolve_data_dir(data_dir))
    examples, _ = qa.load_jsonl(path, on_bad_line=config.data.on_bad_line)
    feats[split] = cached_features(
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

  def graph_of(split, rows):
    return graphs[split].take(rows) if graphs else None

  @jax.jit
  def step_fn(state, features, choice_mask, gold_b, graph):
    rng = jax.random.fold_in(state.rng, state.step)

    def loss_of(params):
      logits = choice_head.head_logits(model, params, features, choice_mask,
                                       rng, graph=graph)
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
    return step_fn(state, tuple(x[rows] for x in inputs), mask[rows], g,
                   graph_of(t.split, rows))

  forward = jax.jit(lambda p, f, m, graph: jax.nn.softmax(
      choice_head.head_logits(model, p, f, m, graph=graph), -1))

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


