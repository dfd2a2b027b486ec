"""Model soups: one answer model from the average of several runs' weights.

Wortsman et al. (2022), *Model soups*: models fine-tuned from the same
pretrained weights often lie in one basin of the loss, so the uniform
average of their weights is a single model that is usually as good as their
probability ensemble, at one model's inference cost. Every answer run here
fine-tunes the same all-MiniLM-L6-v2 checkpoint, so runs that differ only in
seed, epochs or learning rate are soup ingredients; their heads (a fresh
``Dense(1)`` per seed) are averaged like every other weight.

    python launch/soup.py --workdirs=RUN_A,RUN_B,RUN_C --out=SOUP

``SOUP`` is an answer run like any other (``evaluate.py --answer_only``,
``--ensemble``, ``answer.py``, the agents' loop): its ``config.json`` is the
first ingredient's, its one checkpoint (step 0, a fresh optimizer state)
holds the averaged weights, and ``soup.json`` names the ingredients and the
checkpoint step of each. Ingredients must be one kind of model shown one
kind of input (the knowledge fields of
:data:`racer_jax.agents.answer_agent.KNOWLEDGE_FIELDS`, the text model, the
token budget): anything else is refused with the field named. The uniform
soup is the rule, fixed in advance; a *greedy* soup would pick ingredients
on held-out accuracy, which the evaluated split must not provide.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from racer_jax.agents.answer_agent import (
  LocalAnswerer,
  config_field,
  knowledge_setup,
  setup_differences,
)
from racer_jax.answer import evaluation
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs import registry, run_config

# Besides the knowledge setup: what makes two answer runs' weights and
# inputs interchangeable.
MODEL_FIELDS = ("train.stage", "answer.model", "answer.max_length",
                "text.model_dir", "answer.head_hidden")


def recipe(config) -> dict:
  """``{field: value}``: the model and input fields ingredients must share."""
  return {**knowledge_setup(config),
          **{name: config_field(config, name) for name in MODEL_FIELDS}}


def check_ingredients(configs: list, names: list[str]) -> None:
  """Raises ValueError naming each field where an ingredient's config
  differs from the first's (``configs``: ConfigDicts; ``names``: their
  folders, for the message)."""
  if len(configs) < 2:
    raise ValueError("a soup needs at least two answer runs")
  if recipe(configs[0])["train.stage"] != "answer":
    raise ValueError(f"{names[0]}: train.stage is "
                     f"{recipe(configs[0])['train.stage']!r}, not 'answer'")
  first = recipe(configs[0])
  if not registry.ANSWER_MODELS.get(first["answer.model"]).soup:
    soupable = [n for n in registry.ANSWER_MODELS.names()
                if registry.ANSWER_MODELS.get(n).soup]
    raise ValueError(f"{names[0]}: answer.model={first['answer.model']!r} "
                     "runs share no pretrained weights to average around "
                     f"(a soup is of {soupable} runs)")
  for config, name in zip(configs[1:], names[1:]):
    theirs = recipe(config)
    diff = setup_differences(first, theirs, first)
    if diff:
      raise ValueError(
          f"{name} cannot join a soup with {names[0]}: {diff} (ingredients "
          "must be one model shown one kind of input)")


def average_params(param_trees: list) -> dict:
  """The uniform soup: the elementwise mean of same-shaped parameter trees,
  accumulated in float32 and cast back to each leaf's dtype."""
  shapes = {str(jax.tree.map(np.shape, t)) for t in param_trees}
  if len(shapes) != 1:
    raise ValueError("ingredients' parameters differ in structure or shape")

  def mean(*leaves):
    total = sum(jnp.asarray(x, jnp.float32) for x in leaves)
    return (total / len(leaves)).astype(jnp.asarray(leaves[0]).dtype)

  return jax.tree.map(mean, *param_trees)


def make_soup(workdirs, out_dir, *,
              log: Callable[[str], None] = print) -> dict:
  """Writes the uniform soup of the answer runs in ``workdirs`` to
  ``out_dir`` (which must not hold a run yet); returns ``soup.json``'s
  content."""
  out_dir = Path(out_dir).resolve()
  if (out_dir / "config.json").exists() or (out_dir / "checkpoints").exists():
    raise FileExistsError(f"{out_dir} already holds a run; choose a new "
                          "folder for the soup")
  workdirs = [Path(w).resolve() for w in workdirs]
  for w in workdirs:
    if not (w / "config.json").is_file():
      raise FileNotFoundError(f"{w / 'config.json'} not found: not an "
                              "answer run")
  configs = [run_config.load(w, "answer run") for w in workdirs]
  check_ingredients(configs, [str(w) for w in workdirs])
  runs = []
  for w in workdirs:
    runs.append(LocalAnswerer(w, log=log))
    log(f"ingredient {w} (step {runs[-1].step})")
  params = average_params([r.state.params for r in runs])
  first = runs[0].state
  state = first.replace(
      params=params, step=jnp.zeros_like(first.step),
      opt_state=jax.tree.map(jnp.zeros_like, first.opt_state))
  soup = {"method": "uniform", "ingredients": [str(w) for w in workdirs],
          "ingredient_steps": [int(r.step) for r in runs]}
  out_dir.mkdir(parents=True, exist_ok=True)
  ckpt = Checkpointer(out_dir / "checkpoints")
  ckpt.save(0, state, {"soup": soup})
  ckpt.close()
  # the first ingredient's config, its run paths re-based on the soup
  run_config.save(run_config.load(workdirs[0], "answer run"), out_dir,
                  "answer")
  (out_dir / "soup.json").write_text(json.dumps(soup, indent=1))
  return soup


def evaluate_soup(out_dir, data_dir=None, split=None,
                  log: Callable[[str], None] = print) -> dict:
  """The soup in ``out_dir`` and its ingredients' probability ensemble
  evaluated on ``split`` (default: the run's ``eval.split``); the
  ensemble's report is kept in the soup's ``eval/<split>.ingredients``."""
  out = Path(out_dir)
  soup = json.loads((out / "soup.json").read_text())
  config = run_config.load(out, "soup")
  own = evaluation.evaluate(config, data_dir, str(out), split=split,
                             log=log)
  ens = evaluation.evaluate(
      config, data_dir, soup["ingredients"][0],
      ensemble=soup["ingredients"][1:], split=split,
      out_workdir=out, name=f"{own['split']}.ingredients", log=log)
  return {"accuracy": own["accuracy"], "split": own["split"],
          "questions": own["questions"],
          "accuracy_ingredients": ens["accuracy_members"],
          "accuracy_ensemble": ens["accuracy"]}

