"""The answer model alone, from its checkpoint — one run, or an ensemble.

  python launch/evaluate.py --workdir=W --answer_only [--ensemble=W2,W3]

The answer run in ``W`` (then each run of ``--ensemble``: its *members*) is
restored from its newest checkpoint and shown the knowledge it was trained
with, read from its own ``config.json`` (similar training questions, the
open book, choice triples, refined paths: :func:`inputs.knowledge_for`),
so members may differ in knowledge, seed or epochs. Without the agents: no
critic, no re-exploration — the figure the answer stage reports at the end of
training, recomputed from the checkpoint.

The ensemble's choice probabilities are the members' probabilities averaged
(each member's softmax over the choices, equal weights): the usual rule, fixed
here rather than chosen on the evaluated split.

Files in ``<W>/eval/<split>.answer_only/`` (the layout of every evaluation,
:mod:`racer_jax.runs.eval_output`):

* ``member<i>.answer.jsonl`` — member ``i``'s predictions (the answer
  stage's format, with the knowledge shown), ``member<i>.json`` its workdir
  and checkpoint step: a rerun reuses a member file that matches, so a
  stopped evaluation loses no finished member;
* ``questions.jsonl`` — the averaged probabilities per question (compare
  runs with ``launch/compare.py``);
* ``metrics.json``, ``report.md`` — the figures, also returned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np

from racer_jax.answer import inputs
from racer_jax.agents.answer_agent import (AnswerRequest, LocalAnswerer,
                                           ensemble_probs)
from racer_jax.data.prepare import write_json
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs import run_config


def member_predictions(workdir, data_dir, split: str, *, progress: bool,
                       log: Callable[[str], None]):
  """``(AnswerData, probs float32 [Q, C], checkpoint step)`` of the answer
  run in ``workdir`` on ``split``, shown the knowledge it was trained
  with."""
  answerer = LocalAnswerer(workdir, log=log)
  config = answerer.config
  knowledge = inputs.knowledge_for(config, data_dir, [split], progress,
                                         log, cache_dir=workdir)
  shown = knowledge[split] if knowledge else None
  evidence = inputs.evidence_for(config, data_dir, [split], progress,
                                        log)
  graph_paths = inputs.graph_paths_for(config, data_dir, [split],
                                             progress, log)
  examples = inputs.load_examples(config, data_dir, split)
  requests = [AnswerRequest(e.stem, list(e.choices),
                            shown[i] if shown else None,
                            evidence=evidence[split][i] if evidence else None,
                            paths=graph_paths[split][i] if graph_paths
                            else None)
              for i, e in enumerate(examples)]
  probs = answerer.probs(requests)
  gold = np.array([-1 if e.answer_index is None else e.answer_index
                   for e in examples], np.int32)
  data = inputs.AnswerData(examples, None, gold,
                                 answerer.num_choices, shown)
  return data, probs, answerer.step


def _load_member(path: Path, meta_path: Path, workdir: Path):
  """A finished member's ``(ids, gold, probs, step, choice counts)`` when
  its files match the run's newest checkpoint, else None."""
  if not (path.is_file() and meta_path.is_file()):
    return None
  meta = json.loads(meta_path.read_text())
  ckpt = Checkpointer(workdir / "checkpoints")
  steps = ckpt.all_steps()
  ckpt.close()
  if meta.get("workdir") != str(workdir) or not steps or (
      meta.get("step") != steps[-1]):
    return None
  rows = [json.loads(line) for line in path.read_text().splitlines()]
  width = max(len(r["probs"]) for r in rows)
  probs = np.zeros((len(rows), width), np.float32)
  for i, r in enumerate(rows):
    probs[i, :len(r["probs"])] = r["probs"]
  return ([r["id"] for r in rows], np.array([r["gold"] for r in rows]),
          probs, meta["step"], [len(r["probs"]) for r in rows])


def evaluate(config, data_dir, workdir, *, ensemble=(), split=None,
             out_workdir=None, name=None, progress: bool = True,
             log: Callable[[str], None] = print) -> dict:
  """See the module docstring. ``config``: the run in ``workdir``;
  ``ensemble``: further answer run folders (members); the files go to
  ``<out_workdir>/eval/<name>/`` (default ``<workdir>/eval/<split>.
  answer_only/``)."""
  workdir = Path(workdir).resolve()
  split = split or config.eval.split
  members = [workdir] + [Path(w).resolve() for w in ensemble]
  for m in members:
    if not (m / "config.json").is_file():
      raise FileNotFoundError(f"{m / 'config.json'} not found: not an "
                              "answer run")
    stage = run_config.load(m, "answer run").train.stage
    if stage != "answer":
      raise ValueError(f"{m}: train.stage is {stage!r}, not 'answer'")
  out = EvalOutput(out_workdir or workdir, name or f"{split}.answer_only")
  ids = gold = None
  rows, accuracies, steps = [], [], []
  for i, m in enumerate(members):
    path = out.dir / f"member{i}.answer.jsonl"
    meta_path = out.dir / f"member{i}.json"
    done = _load_member(path, meta_path, m)
    if done is not None:
      member_ids, member_gold, probs, step, counts = done
      log(f"member {i} ({m}, step {step}): reusing {path.name}")
    else:
      log(f"member {i}: {m}")
      data, probs, step = member_predictions(m, data_dir, split,
                                             progress=progress, log=log)
      inputs.write_predictions(path, data, probs)
      write_json(meta_path, {"workdir": str(m), "step": step})
      member_ids = [e.id for e in data.examples]
      member_gold = data.gold
      counts = [len(e.choices) for e in data.examples]
    if ids is None:
      ids, gold = member_ids, member_gold
    elif member_ids != ids or not np.array_equal(member_gold, gold):
      raise ValueError(f"member {m} was evaluated on other questions than "
                       f"{members[0]} (split {split!r}): its data config "
                       "differs")
    rows.append(probs)
    steps.append(step)
    accuracies.append(inputs.accuracy(probs, gold))
    log(f"member {i} accuracy {accuracies[-1]:.4f}")
  width = max(p.shape[1] for p in rows)
  rows = [np.pad(p, ((0, 0), (0, width - p.shape[1]))) for p in rows]
  probs = ensemble_probs(rows)
  labeled = gold >= 0
  with out.questions() as f:
    for q, qid in enumerate(ids):
      f.write(json.dumps({"id": qid, "gold": int(gold[q]),
                          "prediction": int(np.argmax(probs[q])),
                          "probs": [round(float(x), 5)
                                    for x in probs[q][:counts[q]]]})
              + "\n")
  figures = {
      "accuracy": inputs.accuracy(probs, gold),
      "accuracy_members": accuracies,
      "accuracy_members_mean": float(np.mean(accuracies)),
      "members": [str(m) for m in members],
      "member_steps": steps,
      "questions": int(labeled.sum()),
      "split": split,
  }
  return out.finish(figures, title=f"The answer model alone on {split}")
