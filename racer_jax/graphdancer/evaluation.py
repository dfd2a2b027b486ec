"""GraphDancer's figures for a trained explorer and, on the same questions,
the untrained model (``zero_shot_`` keys).

Per question (``questions.jsonl``): the response, its turns, calls, how it
ended, its answer and reward. Figures (GraphDancer's Tables 5, 10, 12):

* ``valid_format_rate`` — questions whose whole response follows the
  protocol (:func:`~racer_jax.graphdancer.episode.valid_sequence`);
* ``valid_call_rate`` — calls that returned a result / calls made;
* ``evidence_hit`` — questions where a concept of the gold choice appeared
  in a neighbour list the model was shown;
* ``calls_per_question``; ``unfinished_at_limit`` — questions that never
  answered (turn limit or context cap);
* ``accuracy`` — the answer names the gold choice (exact match after
  SQuAD's normalization); ``reward`` — the paper's reward, averaged.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

import numpy as np
from flax import nnx

from racer_jax.graphdancer import sft
from racer_jax.graphdancer.episode import (answer_matches, reward,
                                           valid_sequence)
from racer_jax.graphdancer.rollout import Rollout, environment
from racer_jax.graphdancer.run import PPORun, reward_weights
from racer_jax.lm import causal_lm
from racer_jax.runs import builders
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.runs.workspace import load_workspace


def record(trajectory, gold_concepts: set[str], weights) -> dict:
  """What ``questions.jsonl`` keeps of one trajectory."""
  ep = trajectory.episode
  seen = {t.tail for t in ep.evidence} | {t.head for t in ep.evidence}
  return {"turns": ep.turns, "calls": ep.calls, "valid_calls": ep.valid_calls,
          "end": ep.end, "answer": ep.answer,
          "valid_format": valid_sequence(ep.response)[0],
          "correct": answer_matches(ep.answer, ep.golds),
          "evidence_hit": bool(seen & gold_concepts),
          "reward": reward(ep.response, ep.golds, weights),
          "response_tokens": len(trajectory.ids) - trajectory.prompt_length,
          "response": ep.response}


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
          "accuracy": sum(r["correct"] for r in records) / n,
          "reward": float(np.mean([r["reward"] for r in records]))
          if records else 0.0}


def evaluate(config, data_dir, workdir, *, split: str | None = None,
             progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """Explores ``split`` (``eval.split``) with the run's explorer and with
  the untrained model; writes ``<workdir>/eval/<split>.explorer/``."""
  g = config.graphdancer
  split = split or config.eval.split
  ws = load_workspace(config, data_dir, builders.prep_dir_of(config, workdir),
                      [split], progress=progress, log=log)
  data = ws.splits[split]
  rows = [i for i, e in enumerate(data.examples) if e.answer_index is not None]
  if g.eval_questions:
    rows = rows[:g.eval_questions]
  questions, golds = [], []
  for i in rows:
    e, sg = data.examples[i], data.subgraphs[i]
    gold = e.choices[e.answer_index]
    questions.append((e.stem, list(e.choices), [gold]))
    golds.append({ws.kg.concepts[int(c)]
                  for c in sg.nodes[sg.choice_mask[:, e.answer_index]]})
  base = causal_lm.load_causal_lm(g.model, dtype=g.dtype)
  trained, step = sft.restore(base, (Path(workdir) / "sft").resolve())
  ppo_step = 0
  if g.ppo_steps and (Path(workdir) / "ppo").is_dir():
    run = PPORun(config, trained, Path(workdir) / "ppo")
    graphdef, state = nnx.split(run.ppo.actor)
    trained = dataclasses.replace(trained, graphdef=graphdef, state=state)
    ppo_step = run.step
  log(f"explorer: SFT step {step}, PPO update {ppo_step} (0 and 0: the "
      "untrained model)")
  weights = reward_weights(config)
  out = EvalOutput(workdir, f"{split}.explorer")
  figures = {}
  with out.questions() as f:
    for prefix, lm in (("", trained), ("zero_shot_", base)):
      env, system = environment(config, ws.kg, lm.tokenizer)
      runs = Rollout(lm, env, system, max_step_tokens=g.max_step_tokens,
                     max_context_tokens=g.max_context_tokens).run(
          questions, temperature=g.eval_temperature, seed=config.seed,
          progress=progress)
      records = [record(t, gc, weights) for t, gc in zip(runs, golds)]
      for i, r in zip(rows, records):
        f.write(json.dumps({"id": data.examples[i].id,
                            "model": prefix.rstrip("_") or "trained",
                            **r}) + "\n")
      figures.update({prefix + k: v for k, v in figures_of(records).items()})
  figures.update(model=g.model, sft_step=step, ppo_step=ppo_step)
  return out.finish(figures, title=f"GraphDancer's explorer on {split}")
