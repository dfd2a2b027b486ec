"""The main job: every stage of RACER on one config, end to end.

Runs, each into its own folder under ``workdir`` (a stage whose folder
already holds a finished run resumes or is skipped):

1. ``walker/``: prepares the data (KG, grounding, subgraphs; cached in
   ``prep/``) and trains the walker with its shared memory;
2. ``refiner/``: trains the dual-attention refiner on the walker's paths;
3. ``answer/``: trains the AnswerAgent's local model on the refined paths
   as text (``answer.model``: the frozen-vector head or the cross-encoder);
4. evaluates the four agents on ``eval.split`` (``eval.seeds`` seeds; the
   report lands in ``answer/eval/<split>/report.md``);
5. answers one question (default the split's first) and draws its
   reasoning paths.

With ``ablations`` it also trains the runs the ablation table needs
(walkers with p_teacher = 0 and without pruning, each with its refiner, and
a HyGRL run — same config, budget and seed) and evaluates every ablation of
:mod:`racer_jax.eval.agents_eval`.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Sequence

from racer_jax.agents.pipeline import Pipeline
from racer_jax.data import datasets, qa
from racer_jax.errors import ConfigError
from racer_jax.eval import agents_eval, plots
from racer_jax.runs import eval_output
from racer_jax.runs import registry, workdir_lock
from racer_jax.runs.config_checks import check_config
from racer_jax.answer import stage as answer_stage
from racer_jax.refiner import stage as refiner_stage
from racer_jax.walker import stage as walker_stage

STAGES = ("walker", "refiner", "answer", "evaluate", "answer_one")


def changed(config, change: dict):
  """A copy of ``config`` with ``{"section.field": value}`` (or a
  top-level ``{"field": value}``) applied."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    for key, value in change.items():
      *sections, field = key.split(".")
      node = config
      for section in sections:
        node = node[section]
      node[field] = value
  return config


def stage_configs(config, root: str):
  """``(walker, refiner, answer)`` configs of the main job under ``root``:
  the refiner reads ``root/walker``, the answer model ``root/refiner``."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    if not config.prep_dir:
      config.prep_dir = os.path.join(root, "prep")
    config.memory.enabled = True
  rconfig = changed(config, {"train.stage": "refiner",
                             "refiner.walker_workdir":
                             os.path.join(root, "walker")})
  aconfig = changed(rconfig, {"train.stage": "answer",
                              "answer.knowledge_workdir":
                              os.path.join(root, "refiner")})
  return config, rconfig, aconfig


def train_ablation_runs(config, rconfig, data_dir, root, progress) -> dict:
  """The runs of the ablations that change training
  (:data:`racer_jax.runs.registry.ABLATIONS` with ``changes``): by their
  trainer, else a walker and a refiner over it (``no_teacher``,
  ``no_pruning``). Returns name -> the run the evaluation reads."""
  out = {}
  for name in registry.ABLATIONS.names():
    ablation = registry.ABLATIONS.get(name)
    if ablation.changes is None:
      continue
    if ablation.trainer is not None:
      out[name] = os.path.join(root, name)
      registry.resolve(ablation.trainer, name)(
          changed(config, ablation.changes), data_dir, out[name],
          progress=progress)
      continue
    walker = os.path.join(root, f"walker_{name}")
    walker_stage.train(changed(config, ablation.changes), data_dir, walker,
                       progress=progress)
    out[name] = os.path.join(root, f"refiner_{name}")
    refiner_stage.train(changed(rconfig, {**ablation.changes,
                                          "refiner.walker_workdir": walker}),
                        data_dir, out[name], progress=progress)
  return out


def first_question(config, data_dir) -> tuple[str, list[str]]:
  """The evaluation split's first question and its choices."""
  path = datasets.split_path(config, config.eval.split,
                             datasets.resolve_data_dir(data_dir))
  examples = qa.load_jsonl(path)[0]
  if not examples:
    raise ConfigError(f"{path}: the evaluation split has no questions")
  return examples[0].stem, list(examples[0].choices)


def run_main_job(config, data_dir, workdir, *, question: str | None = None,
                 choices: Sequence[str] | None = None,
                 plot: str | None = None, ablations: bool = False,
                 progress: bool = True,
                 log: Callable[[str], None] = print) -> dict:
  """Runs the five stages (see the module docstring). Returns the
  evaluation's scalar figures plus ``stage_seconds``."""
  if bool(question) != bool(choices):
    raise ConfigError("give --question and --choices together (or neither: "
                      "the evaluation split's first question)")
  check_config(config)
  root = os.path.abspath(workdir)
  with workdir_lock.hold(root, what="main job folder"):
    return _stages(config, data_dir, root, question, choices, plot,
                   ablations, progress, log)


def _stages(config, data_dir, root, question, choices, plot, ablations,
            progress, log) -> dict:
  config, rconfig, aconfig = stage_configs(config, root)
  answer_dir = os.path.join(root, "answer")
  seconds = {}

  def stage(number, title):
    log(f"\n=== {number}/5 {title} ===")
    return time.perf_counter()

  t = stage(1, "prepare the data and train the walker")
  walker_stage.train(config, data_dir, rconfig.refiner.walker_workdir,
                     progress=progress)
  seconds["walker"] = time.perf_counter() - t
  t = stage(2, "train the refiner on the walker's paths")
  refiner_stage.train(rconfig, data_dir, aconfig.answer.knowledge_workdir,
                      progress=progress)
  seconds["refiner"] = time.perf_counter() - t
  t = stage(3, f"train the answer model ({config.answer.model})")
  answer_stage.train(aconfig, data_dir, answer_dir, progress=progress)
  seconds["answer"] = time.perf_counter() - t

  names, ablation_workdirs = (), {}
  if ablations:
    log("\n=== ablations: train walkers without teacher and without "
        "pruning, their refiners, and HyGRL ===")
    t = time.perf_counter()
    ablation_workdirs = train_ablation_runs(config, rconfig, data_dir, root,
                                            progress)
    names = registry.ABLATIONS.names()
    seconds["ablation_runs"] = time.perf_counter() - t

  t = stage(4, f"evaluate the four agents on {config.eval.split}")
  figures = agents_eval.evaluate(
      aconfig, data_dir, answer_dir, seeds=config.eval.seeds, resume=True,
      ablations=names, ablation_workdirs=ablation_workdirs,
      progress=progress)
  seconds["evaluate"] = time.perf_counter() - t
  report = os.path.join(figures["out_dir"], eval_output.REPORT)
  log(f"accuracy {figures['accuracy']:.3f} ± "
      f"{figures.get('accuracy_std', 0.0):.3f} over {figures['seeds']} "
      f"seed(s); path hit rate {figures.get('path_hit_rate', 0.0):.3f}; "
      f"report {report}")

  t = stage(5, "answer one question")
  if not question:
    question, choices = first_question(aconfig, data_dir)
  pipeline = Pipeline(answer_dir, data_dir, log=lambda _: None)
  result = pipeline.answer(question, list(choices))
  log(result.explain())
  plot = plot or os.path.join(root, "reasoning_paths.png")
  plots.reasoning_paths(result.to_dict(), plot)
  log(f"reasoning paths drawn to {plot}")
  seconds["answer_one"] = time.perf_counter() - t
  return {**{k: v for k, v in figures.items()
             if not isinstance(v, (dict, list))}, "stage_seconds": seconds}
