"""GraphDancer's training stage (``method=graphdancer``): the explorer LM
learns to explore the graph.

1. The graph and its functions (:mod:`racer_jax.graphdancer.tools`): the
   run's prepared ConceptNet store, or a passage graph
   (``graphdancer.graph=passages``, :mod:`racer_jax.graphdancer.passage_task`).
2. Gold trajectories of the training questions (on ConceptNet, the
   validation slice held out), played through the environment
   (:mod:`racer_jax.graphdancer.trajectories`); their counts per curriculum
   group go to ``warm_start.json``.
3. The supervised warm start (:mod:`racer_jax.graphdancer.sft`), resumable
   from ``<workdir>/sft``.

4. PPO (``graphdancer.ppo_steps``) from the warm-started model, questions
   drawn by the paper's easy-to-hard sampler or uniformly
   (:mod:`racer_jax.graphdancer.run`), resumable from ``<workdir>/ppo``.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Callable

import jax
import numpy as np
from jax.experimental import multihost_utils

from racer_jax.data.prepare import write_json
from racer_jax.errors import ConfigError
from racer_jax.graphdancer import inputs, passage_task, sft, trajectories
from racer_jax.graphdancer import run as run_lib
from racer_jax.graphdancer.rollout import environment
from racer_jax.graphdancer.tools import GraphTools
from racer_jax.lm import causal_lm
from racer_jax.runs import builders, distributed, parallel, run_config


def conceptnet_rows(config, ws, env, system, tokenizer, log):
  """The training questions outside the validation slice: ``(rows,
  counts, questions, group_of)`` — the encoded gold trajectories
  ``(ids, loss_mask)``, a count of what was kept and why the rest was not,
  every question as ``(question, choices, golds)`` and its curriculum group
  (0 easy, 1 medium, 2 hard: by the gold path's hops; none within
  ``max_hops``: hard)."""
  g = config.graphdancer
  split = ws.splits[config.train.split]
  counts = collections.Counter()
  rows, questions, group_of = [], [], []
  for i in split.dataset.ids:
    example, subgraph = split.examples[int(i)], split.subgraphs[int(i)]
    gold = example.choices[example.answer_index]
    questions.append((example.stem, list(example.choices), [gold]))
    out = trajectories.conceptnet_trajectory(env, example, subgraph,
                                             g.max_hops)
    hops = None if out is None else len(out[1])
    group_of.append(trajectories.GROUPS.index(
        trajectories.difficulty_group(hops)))
    if out is None:
      counts["no_gold_path"] += 1
      continue
    prompt = inputs.prompt_ids(tokenizer, system, example.stem,
                               example.choices)
    ids, mask = inputs.encode_episode(tokenizer, prompt, out[0])
    if len(ids) > g.max_context_tokens:
      counts["longer_than_context"] += 1
      continue
    counts[trajectories.difficulty_group(hops)] += 1
    rows.append((ids, mask))
  log(f"explorer warm start: {len(rows)} gold trajectories of "
      f"{len(split.dataset.ids)} training questions ({dict(counts)})")
  return rows, dict(counts), questions, np.asarray(group_of, np.int64)


def passage_rows(config, task, env, system, tokenizer, log):
  """:func:`conceptnet_rows` for a passage graph's training questions."""
  g = config.graphdancer
  counts = collections.Counter()
  rows, questions, group_of = [], [], []
  for q in task.split("train"):
    questions.append((q.question, [], [q.answer]))
    group_of.append(task.group(q))
    titles = task.gold_titles(q)
    if len(titles) * 2 + 1 > g.max_turns:
      counts["longer_than_turn_limit"] += 1
      continue
    out = trajectories.passage_trajectory(env, q, titles)
    if out is None:
      counts["gold_passage_missing"] += 1
      continue
    prompt = inputs.prompt_ids(tokenizer, system, q.question, [])
    ids, mask = inputs.encode_episode(tokenizer, prompt, out[0])
    if len(ids) > g.max_context_tokens:
      counts["longer_than_context"] += 1
      continue
    counts[trajectories.GROUPS[group_of[-1]]] += 1
    rows.append((ids, mask))
  log(f"explorer warm start: {len(rows)} gold trajectories of "
      f"{len(questions)} training questions ({dict(counts)})")
  return rows, dict(counts), questions, np.asarray(group_of, np.int64)


def _setting(config, data_dir, workdir, lm, progress, log):
  """``(workdir, env, system, (rows, counts, questions, group_of))`` of
  the configured graph."""
  g = config.graphdancer
  if g.graph == "passages":
    workdir = Path(workdir)
    primary = distributed.is_primary()

    def load():
      return passage_task.load(config, data_dir,
                               builders.prep_dir_of(config, workdir),
                               log=log if primary else (lambda _: None))
    if primary:   # prepares and caches; the other processes then read
      workdir.mkdir(parents=True, exist_ok=True)
      run_config.save(config, workdir, "graphdancer")
      task = load()
    if jax.process_count() > 1:
      multihost_utils.sync_global_devices("racer_jax: passages prepared")
    if not primary:
      task = load()
    env, system = environment(config, task.tools, lm.tokenizer)
    return workdir, env, system, passage_rows(config, task, env, system,
                                              lm.tokenizer, log)
  if config.data.dataset not in ("csqa", "obqa", "obqa_additional", "demo"):
    raise ConfigError(
        f"graphdancer.graph=conceptnet explores ConceptNet for choice "
        f"questions (data.dataset csqa, obqa or demo), not "
        f"{config.data.dataset!r}; a passage set: graphdancer.graph=passages")
  workdir, ws, _ = builders.start_run(config, data_dir, workdir,
                                      progress=progress, log=log,
                                      stage="graphdancer")
  tools = GraphTools(ws.kg, max_neighbours=g.max_neighbours)
  env, system = environment(config, tools, lm.tokenizer)
  return workdir, env, system, conceptnet_rows(config, ws, env, system,
                                               lm.tokenizer, log)


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print) -> dict:
  """Trains (or resumes) the explorer in ``workdir``; returns the last
  figures."""
  g = config.graphdancer
  lm = causal_lm.load_causal_lm(g.model, dtype=g.dtype, remat=g.remat)
  workdir, env, system, (rows, counts, questions, group_of) = _setting(
      config, data_dir, workdir, lm, progress, log)
  if not rows:
    raise ConfigError("no gold trajectory among the training questions: "
                      "nothing to warm-start the explorer on")
  figures = {"warm_start": counts, "warm_start_trajectories": len(rows)}
  if g.sft_steps:
    lm, losses = sft.train(
        lm, rows, steps=g.sft_steps, batch_size=g.sft_batch_size,
        learning_rate=g.sft_learning_rate, weight_decay=g.weight_decay,
        warmup_steps=g.sft_warmup_steps, seed=config.seed,
        checkpoint_dir=(Path(workdir) / "sft").resolve(),
        checkpoint_every=g.checkpoint_every,
        mesh=parallel.make_mesh(config.train.num_devices), log=log)
    if losses:
      figures.update(sft_loss_first=losses[0], sft_loss_last=losses[-1],
                     sft_steps_run=len(losses))
  if distributed.is_primary():
    write_json(Path(workdir) / "warm_start.json", figures)
  log(f"explorer: {figures}")
  if g.ppo_steps:
    ppo = run_lib.PPORun(config, lm, Path(workdir) / "ppo")
    figures.update(run_lib.train(config, ppo, env, system, questions,
                                 group_of, workdir, progress=progress,
                                 log=log))
  return figures
