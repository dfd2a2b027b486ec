"""GraphDancer's figures for a trained explorer and, on the same questions,
the untrained model (``zero_shot_`` keys).

Per question (``questions.jsonl``): the response, its turns, calls, how it
ended, its answer and reward. Figures (GraphDancer's Tables 5, 10, 12):

* ``valid_format_rate`` — questions whose whole response follows the
  protocol (:func:`~racer_jax.graphdancer.episode.valid_sequence`);
* ``valid_call_rate`` — calls that returned a result / calls made;
* ``evidence_hit`` — questions where the gold showed up in what the model
  was shown (ConceptNet: a concept of the gold choice in a neighbour list;
  passages: a gold passage's title in an observation);
* ``calls_per_question``; ``unfinished_at_limit`` — questions that never
  answered (turn limit or context cap);
* ``accuracy`` (choice questions: the answer is the gold choice's text
  after SQuAD's normalization) or ``exact_match``, ``f1``, ``rouge_l``
  (passages); ``reward`` — the paper's reward, averaged.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

import numpy as np
import tqdm
from flax import nnx

from racer_jax.data import qa
from racer_jax.errors import bars_off
from racer_jax.graphdancer import passage_task, sft
from racer_jax.graphdancer.episode import (answer_matches, reward,
                                           valid_sequence)
from racer_jax.graphdancer.rollout import Rollout, environment
from racer_jax.graphdancer.run import PPORun, reward_weights
from racer_jax.graphdancer.tools import GraphTools
from racer_jax.lm import causal_lm
from racer_jax.runs import builders
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.runs.workspace import load_workspace


def record(trajectory, hit: Callable, weights) -> dict:
  """What ``questions.jsonl`` keeps of one trajectory; ``hit(episode)``:
  whether the gold showed up in what it was shown."""
  ep = trajectory.episode
  answer = ep.answer or ""
  out = {"turns": ep.turns, "calls": ep.calls, "valid_calls": ep.valid_calls,
         "end": ep.end, "answer": ep.answer,
         "valid_format": valid_sequence(ep.response)[0],
         "correct": answer_matches(ep.answer, ep.golds),
         "evidence_hit": bool(hit(ep)),
         "reward": reward(ep.response, ep.golds, weights),
         "response_tokens": len(trajectory.ids) - trajectory.prompt_length,
         "response": ep.response}
  if not ep.choices:
    out.update(exact_match=max(qa.exact_match(answer, g) for g in ep.golds),
               f1=max(qa.token_f1(answer, g) for g in ep.golds),
               rouge_l=max(qa.rouge_l(answer, g) for g in ep.golds))
  return out


def figures_of(records: list[dict]) -> dict:
  """The figures of the module docstring over ``records``."""
  n = max(len(records), 1)
  calls = sum(r["calls"] for r in records)
  return {"questions": len(records),
          "valid_format_rate": sum(r["valid_format"] for r in records) / n,
          "valid_call_rate": sum(r["valid_calls"] for r in records) /
          max(calls, 1),
          "evidence_hit": sum(r["evidence_hit"] for r in records) / n,
          "calls_per_question": calls / n,
          "unfinished_at_limit": sum(r["end"] != "answer"
                                     for r in records) / n,
          "reward": float(np.mean([r["reward"] for r in records]))
          if records else 0.0,
          **({k: float(np.mean([r[k] for r in records]))
              for k in ("exact_match", "f1", "rouge_l")}
             if records and "exact_match" in records[0] else
             {"accuracy": sum(r["correct"] for r in records) / n})}


def _questions(config, data_dir, workdir, split, eval_file, progress, log):
  """``(tools, ids, questions, hits)`` of the evaluated questions:
  ``(question, choices, golds)`` each, and ``hit(episode)``."""
  g = config.graphdancer
  if g.graph == "passages":
    task = passage_task.load(config, data_dir,
                             builders.prep_dir_of(config, workdir),
                             eval_file=eval_file, log=log)
    chosen = (list(task.data.questions) if eval_file else task.split(split))
    chosen = chosen[:g.eval_questions or None]
    hits = [lambda ep, titles=set(task.gold_titles(q)): any(
        title in " ".join(s.text for s in ep.segments if not s.by_model)
        for title in titles) for q in chosen]
    return (task.tools, [q.id for q in chosen],
            [(q.question, [], [q.answer]) for q in chosen], hits)
  if eval_file:
    raise ValueError("--eval_file: a passage-graph explorer reads other "
                     "questions of its corpus; a ConceptNet run evaluates "
                     "a dataset split (--split)")
  ws = load_workspace(config, data_dir, builders.prep_dir_of(config, workdir),
                      [split], progress=progress, log=log)
  data = ws.splits[split]
  rows = [i for i, e in enumerate(data.examples)
          if e.answer_index is not None][:g.eval_questions or None]
  questions, hits = [], []
  for i in rows:
    e, sg = data.examples[i], data.subgraphs[i]
    questions.append((e.stem, list(e.choices), [e.choices[e.answer_index]]))
    gold = {ws.kg.concepts[int(c)]
            for c in sg.nodes[sg.choice_mask[:, e.answer_index]]}
    hits.append(lambda ep, gold=gold: bool(gold & (
        {t.tail for t in ep.evidence} | {t.head for t in ep.evidence})))
  return (GraphTools(ws.kg, max_neighbours=g.max_neighbours),
          [data.examples[i].id for i in rows], questions, hits)


def trained_explorer(config, workdir, base):
  """``(the run's explorer LM, SFT step, PPO update)``: the newest PPO
  actor, else the newest SFT checkpoint, else ``base``."""
  g = config.graphdancer
  trained, step = sft.restore(base, (Path(workdir) / "sft").resolve())
  ppo_step = 0
  if g.ppo_steps and (Path(workdir) / "ppo").is_dir():
    run = PPORun(config, trained, Path(workdir) / "ppo")
    graphdef, state = nnx.split(run.ppo.actor)
    trained = dataclasses.replace(trained, graphdef=graphdef, state=state)
    ppo_step = run.step
  return trained, step, ppo_step


def evaluate(config, data_dir, workdir, *, split: str | None = None,
             eval_file: str | None = None, progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """Explores ``split`` (``eval.split``; passages: or every question of
  ``eval_file``) with the run's explorer and with the untrained model;
  writes ``<workdir>/eval/<name>.explorer/``."""
  g = config.graphdancer
  split = split or config.eval.split
  tools, ids, questions, hits = _questions(config, data_dir, workdir, split,
                                           eval_file, progress, log)
  base = causal_lm.load_causal_lm(g.model, dtype=g.dtype)
  trained, step, ppo_step = trained_explorer(config, workdir, base)
  log(f"explorer: SFT step {step}, PPO update {ppo_step} (0 and 0: the "
      f"untrained model); {len(questions)} questions")
  weights = reward_weights(config)
  name = Path(eval_file).stem if eval_file else split
  out = EvalOutput(workdir, f"{name}.explorer")
  figures = {}
  with out.questions() as f:
    for prefix, lm in (("", trained), ("zero_shot_", base)):
      env, system = environment(config, tools, lm.tokenizer)
      rollout = Rollout(lm, env, system, max_step_tokens=g.max_step_tokens,
                        max_context_tokens=g.max_context_tokens)
      size = config.eval.batch_size   # episodes sampled together
      runs = [r for i in tqdm.trange(
          0, len(questions), size, desc=f"explorer {prefix or 'trained_'}"
          "eval", disable=not progress or bars_off())
          for r in rollout.run(questions[i:i + size],
                               temperature=g.eval_temperature,
                               seed=config.seed * 1009 + i)]
      records = [record(t, hit, weights) for t, hit in zip(runs, hits)]
      for qid, r in zip(ids, records):
        f.write(json.dumps({"id": qid, "model": prefix.rstrip("_") or
                            "trained", **r}) + "\n")
      figures.update({prefix + k: v for k, v in figures_of(records).items()})
  figures.update(model=g.model, sft_step=step, ppo_step=ppo_step)
  return out.finish(figures, title=f"GraphDancer's explorer on {name}")
