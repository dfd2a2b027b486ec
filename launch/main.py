r"""The main job: every stage of RACER on one config, end to end.

  python launch/main.py --config=configs/demo.py --workdir=runs/demo
  python launch/main.py --config=configs/csqa.py --data_dir=../shared/data \
      --workdir=runs/csqa --config.answer.model=frozen_head

Runs, each into its own folder under ``--workdir`` (a stage whose folder
already holds a finished run resumes or is skipped):

1. ``walker/``: prepares the data (KG, grounding, subgraphs; cached in
   ``prep/``) and trains the walker with its shared memory;
2. ``refiner/``: trains the dual-attention refiner on the walker's paths;
3. ``answer/``: trains the AnswerAgent's local model on the refined paths
   as text (``answer.model``: the frozen-vector head or the cross-encoder);
4. evaluates the four agents on ``eval.split`` (``eval.seeds`` seeds; the
   report lands in ``answer/eval/<split>/report.md``);
5. answers one question (``--question``/``--choices``, default the split's
   first) and prints its reasoning paths; ``--plot`` draws them.

``--ablations`` also trains the runs the ablation table needs (walkers
with p_teacher = 0 and without pruning, each with its refiner, and a HyGRL
run — same config, budget and seed) and evaluates every ablation of
:mod:`racer_jax.eval.agents_eval`.

The last line of output is one JSON object with the evaluation's figures.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs",
                           "demo.py"), "Configuration file.")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory.",
                               required=True)
_QUESTION = flags.DEFINE_string("question", None, "A question to answer at "
                                "the end (default: the eval split's first).")
_CHOICES = flags.DEFINE_list("choices", None, "Its choices.")
_PLOT = flags.DEFINE_string("plot", None, "Draw the question's reasoning "
                            "paths to this PNG (default: "
                            "<workdir>/reasoning_paths.png).")
_ABLATIONS = flags.DEFINE_bool(
    "ablations", False, "Also train the runs the ablation table needs "
    "(walkers with p_teacher = 0 and without pruning, their refiners, a "
    "HyGRL run; same config, budget and seed) and evaluate every ablation.")
_PROGRESS = flags.DEFINE_bool("progress", True, "Show progress bars.")


def _stage(title: str):
  print(f"\n=== {title} ===", flush=True)
  return time.perf_counter()


def _changed(config, change: dict):
  """A copy of ``config`` with ``{"section.field": value}`` applied."""
  config = config.copy_and_resolve_references()
  with config.unlocked():
    for key, value in change.items():
      section, field = key.split(".")
      config[section][field] = value
  return config


def train_ablation_runs(config, rconfig, data_dir, root, progress) -> dict:
  """The runs of the ablations that change training: ``no_teacher`` and
  ``no_pruning`` (a refiner over a walker trained with p_teacher = 0,
  resp. without pruning) and ``hygrl``."""
  from racer_jax.driver import train_hygrl, train_refiner, train_walker
  out = {}
  for name, change in (("no_teacher", {"train.p_teacher": 0.0,
                                       "train.p_teacher_final": 0.0}),
                       ("no_pruning", {"walker.prune": False})):
    walker = os.path.join(root, f"walker_{name}")
    train_walker.train(_changed(config, change), data_dir, walker,
                       progress=progress)
    out[name] = os.path.join(root, f"refiner_{name}")
    train_refiner.train(_changed(rconfig, {**change,
                                           "refiner.walker_workdir": walker}),
                        data_dir, out[name], progress=progress)
  hygrl = os.path.join(root, "hygrl")
  hc = config.copy_and_resolve_references()
  with hc.unlocked():
    hc.method = "hygrl"
  train_hygrl.train(hc, data_dir, hygrl, progress=progress)
  return {**out, "hygrl": hygrl}


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  from racer_jax.agents.pipeline import Pipeline
  from racer_jax.data import datasets, qa
  from racer_jax.driver import train_answer, train_refiner, train_walker
  from racer_jax.eval import agents_eval, plots

  from racer_jax.driver.check_config import check_config
  config = _CONFIG.value
  check_config(config)
  root = os.path.abspath(_WORKDIR.value)
  data_dir, progress = _DATA_DIR.value, _PROGRESS.value
  walker_dir, refiner_dir, answer_dir = (os.path.join(root, d) for d in
                                         ("walker", "refiner", "answer"))
  with config.unlocked():
    if not config.get("prep_dir"):
      config.prep_dir = os.path.join(root, "prep")
    config.memory.enabled = True
  seconds = {}
  t = _stage("1/5 prepare the data and train the walker")
  train_walker.train(config, data_dir, walker_dir, progress=progress)
  seconds["walker"] = time.perf_counter() - t

  t = _stage("2/5 train the refiner on the walker's paths")
  rconfig = config.copy_and_resolve_references()
  with rconfig.unlocked():
    rconfig.train.stage = "refiner"
    rconfig.refiner.walker_workdir = walker_dir
  train_refiner.train(rconfig, data_dir, refiner_dir, progress=progress)
  seconds["refiner"] = time.perf_counter() - t

  t = _stage(f"3/5 train the answer model ({config.answer.model})")
  aconfig = rconfig.copy_and_resolve_references()
  with aconfig.unlocked():
    aconfig.train.stage = "answer"
    aconfig.answer.knowledge_workdir = refiner_dir
  train_answer.train(aconfig, data_dir, answer_dir, progress=progress)
  seconds["answer"] = time.perf_counter() - t

  ablations, ablation_workdirs = (), {}
  if _ABLATIONS.value:
    t = _stage("ablations: train walkers without teacher and without "
               "pruning, their refiners, and HyGRL")
    ablation_workdirs = train_ablation_runs(config, rconfig, data_dir, root,
                                            progress)
    ablations = tuple(agents_eval.ABLATIONS)
    seconds["ablation_runs"] = time.perf_counter() - t

  t = _stage(f"4/5 evaluate the four agents on {config.eval.split}")
  figures = agents_eval.evaluate(
      aconfig, data_dir, answer_dir, seeds=config.eval.seeds, resume=True,
      ablations=ablations, ablation_workdirs=ablation_workdirs,
      progress=progress)
  seconds["evaluate"] = time.perf_counter() - t
  print(f"accuracy {figures['accuracy']:.3f} ± "
        f"{figures.get('accuracy_std', 0.0):.3f} over {figures['seeds']} "
        f"seed(s); path hit rate {figures.get('path_hit_rate', 0.0):.3f}; "
        f"report {os.path.join(answer_dir, 'eval', figures['name'], 'report.md')}")

  t = _stage("5/5 answer one question")
  question, choices = _QUESTION.value, _CHOICES.value
  if not question:
    path = datasets.split_path(aconfig, config.eval.split,
                               datasets.resolve_data_dir(data_dir))
    example = qa.load_jsonl(path)[0][0]
    question, choices = example.stem, list(example.choices)
  pipeline = Pipeline(answer_dir, data_dir, log=lambda _: None)
  result = pipeline.answer(question, choices)
  print(result.explain())
  plot = _PLOT.value or os.path.join(root, "reasoning_paths.png")
  plots.reasoning_paths(result.to_dict(), plot)
  print(f"reasoning paths drawn to {plot}")
  seconds["answer_one"] = time.perf_counter() - t
  print(json.dumps({**{k: v for k, v in figures.items()
                       if not isinstance(v, (dict, list))},
                    "stage_seconds": seconds}, sort_keys=True))


if __name__ == "__main__":
  app.run(main)
