"""Implementations chosen by name in the config, registered in one place.

A :class:`Registry` maps the names a config field accepts to what they
build. An entry is the implementation itself or its ``"module:attribute"``
path, imported when first used (HELM registers its clients by class path the
same way), so this low layer — and :mod:`racer_jax.runs.config_checks`,
which refuses an unknown name before any work — lists the names without
importing the rooms that implement them. Adding one is one line, anywhere
before the config is checked (a test file may register its own)::

    registry.LLM_BACKENDS.register("mine", "my_package.my_backend:MyBackend")
    registry.ANSWER_MODELS.register("mine", registry.AnswerModel(
        trainer="my_package.mine:train", predictor="my_package.mine:Mine"))

The config field's choices, the launchers' flag choices and the error
messages all read :meth:`Registry.names`.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Callable

from racer_jax.errors import ConfigError


class Registry:
  """Names a config ``field`` accepts -> implementations (``what``: what
  one is, for messages)."""

  def __init__(self, field: str, what: str):
    self.field, self.what = field, what
    self._entries: dict[str, object] = {}

  def register(self, name: str, target, *, replace: bool = False) -> None:
    """``target``: the implementation, its ``"module:attribute"`` path, or
    None (a name that builds nothing). A name is registered once unless
    ``replace``."""
    if not name or not isinstance(name, str):
      raise ValueError(f"{self.what}: a name must be a non-empty string, "
                       f"got {name!r}")
    if name in self._entries and not replace:
      raise ValueError(f"{self.field}={name!r} is already registered "
                       f"({self._entries[name]!r}); pass replace=True")
    self._entries[name] = target

  def unregister(self, name: str) -> None:
    self._entries.pop(name, None)

  def names(self) -> tuple[str, ...]:
    return tuple(self._entries)

  def check(self, name) -> None:
    """A :class:`ConfigError` naming the field and every choice for an
    unregistered ``name``."""
    if name not in self._entries:
      raise ConfigError(f"{self.field}={name!r}: expected one of "
                        f"{list(self._entries)}")

  def get(self, name: str):
    """The implementation registered as ``name`` (imported on first use)."""
    self.check(name)
    target = self._entries[name]
    if isinstance(target, str):
      target = resolve(target, f"{self.field}={name!r}")
      self._entries[name] = target
    return target


def resolve(target, what: str = "target"):
  """``target`` itself, or the attribute its ``"module:attribute"`` path
  names (imported now)."""
  if not isinstance(target, str):
    return target
  module, sep, attribute = target.partition(":")
  if not sep:
    raise ValueError(f"{what}: {target!r} is not a 'module:attribute' path")
  return getattr(importlib.import_module(module), attribute)


# The agents' text LLM (racer_jax.llm.llm.TextBackend subclasses, built
# by racer_jax.llm.llm_backends.make_backend); "local" is no LLM: the
# agents use the trained JAX models.
LLM_BACKENDS = Registry("agents.backend", "LLM backend")
LLM_BACKENDS.register("local", None)
LLM_BACKENDS.register("gemini",
                      "racer_jax.llm.gemini_backend:GeminiBackend")
LLM_BACKENDS.register("openai",
                      "racer_jax.llm.openai_backend:OpenAIBackend")
LLM_BACKENDS.register("jax",
                      "racer_jax.llm.jax_backend:JaxBackend")


def llm_backend_flags(flag: str = "--backend") -> str:
  """The registered LLM backends as a message offers them: "--backend=
  gemini, --backend=openai or --backend=jax" ("local" is none)."""
  names = [f"{flag}={n}" for n in LLM_BACKENDS.names() if n != "local"]
  return " or ".join(filter(None, [", ".join(names[:-1]), names[-1]]))


@dataclasses.dataclass(frozen=True)
class AnswerModel:
  """An answer model (``answer.model``): what the answer stage trains and
  the AnswerAgent restores. Each part is the object or its
  ``"module:attribute"`` path (:func:`resolve`), so the trainer may live in
  ``racer_jax.train`` and the predictor lower, in ``racer_jax.agents``.

  * ``trainer(config, data_dir, workdir, *, progress, log, stop_after)
    -> (last logged metrics, every update done)``: trains or resumes the
    run in ``workdir`` (its config is already saved there), checkpointing
    through :class:`racer_jax.runs.checkpoints.Checkpointer`.
  * ``predictor(config, workdir, *, log)``: the newest checkpoint restored;
    ``.probs(requests) -> float32 [Q, C]`` over the choices of
    :class:`racer_jax.agents.answer_agent.AnswerRequest` s, ``.state``
    (the restored train state) and ``.step``.
  * ``soup``: its runs start from shared pretrained weights, so a model
    soup (:mod:`racer_jax.answer.soup`) may average them.
  * ``reads``: the ``answer.*`` inputs beyond the knowledge text that only
    models naming them read (``evidence_workdir``, ``graph_workdir``).
  """
  trainer: Callable | str
  predictor: Callable | str
  soup: bool = False
  reads: tuple[str, ...] = ()


ANSWER_MODELS = Registry("answer.model", "answer model")
ANSWER_MODELS.register("cross_encoder", AnswerModel(
    trainer="racer_jax.answer.run:train_cross_encoder",
    predictor="racer_jax.answer.run:CrossEncoderPredictor",
    soup=True))
ANSWER_MODELS.register("frozen_head", AnswerModel(
    trainer="racer_jax.answer.run:train_frozen_head",
    predictor="racer_jax.answer.run:FrozenHeadPredictor",
    reads=("evidence_workdir", "graph_workdir")))


def answer_models_reading(field: str) -> list[str]:
  """The registered answer models that read ``answer.<field>``."""
  return [n for n in ANSWER_MODELS.names()
          if field in ANSWER_MODELS.get(n).reads]


# The GraphAgent of the agents' loop (``agents.graph``): a builder
# ``(agents, refiner_dir, workspace, keep, backend, *, encoder, log) ->``
# an object with ``retrieve(batch, rng, temperature=None, examples=None)``,
# ``record(paths, outcome)``, ``reset_memory()``, ``temperature``, ``keep``
# and ``memory_source`` (racer_jax.agents.graph_agent.GraphAgent).
GRAPH_AGENTS = Registry("agents.graph", "GraphAgent")
GRAPH_AGENTS.register("walker", "racer_jax.agents.retrieval:walker_graph_agent")
GRAPH_AGENTS.register("hygrl", "racer_jax.hygrl.agent:hygrl_graph_agent")
GRAPH_AGENTS.register("explorer",
                      "racer_jax.graphdancer.explorer:explorer_graph_agent")


# The stage drivers of ``launch/train.py``: ``train(config, data_dir,
# workdir, *, progress) -> last metrics``. ``method`` names the family whose
# own stage (``train.stage=walker``) it trains; ``train.stage`` names the
# stage, None where the stage is the method's own.
METHODS = Registry("method", "method")
METHODS.register("racer", "racer_jax.walker.stage:train")
METHODS.register("hygrl", "racer_jax.hygrl.stage:train")
METHODS.register("hygrl_multihop", "racer_jax.hygrl.multihop_stage:train")
METHODS.register("graphdancer", "racer_jax.graphdancer.stage:train")
TRAIN_STAGES = Registry("train.stage", "training stage")
TRAIN_STAGES.register("walker", None)
TRAIN_STAGES.register("refiner", "racer_jax.refiner.stage:train")
TRAIN_STAGES.register("answer", "racer_jax.answer.stage:train")
TRAIN_STAGES.register("hygrl_multihop", None)   # multihop's runs' name
TRAIN_STAGES.register("graphdancer", None)      # the explorer's runs



@dataclasses.dataclass(frozen=True)
class Ablation:
  """A row of the agents' ablation table (``--ablations``).

  * ``graph_agent(stack, run, log)``: the GraphAgent it is evaluated with
    (``run``: its own run from ``--ablation_workdirs``, or None); None: the
    full system's (the ablation changes something else).
  * ``changes``: the config changes of the run ``launch/main.py
    --ablations`` trains for it, by ``trainer(config, data_dir, workdir, *,
    progress)`` or, with no trainer, as a walker and a refiner over it; None:
    it trains no run.
  * ``needs``: it cannot run without its own run (the evaluation skips it
    and says so).
  """
  description: str
  graph_agent: Callable | str | None = None
  changes: dict | None = None
  trainer: Callable | str | None = None
  needs: bool = False


ABLATIONS = Registry("--ablations", "ablation")
ABLATIONS.register("no_critic", Ablation(
    "one round, no critic (the calibration pass)"))
ABLATIONS.register("no_refiner", Ablation(
    "paths ranked by the walker's log-probability",
    "racer_jax.eval.ablations:no_refiner"))
ABLATIONS.register("no_memory", Ablation(
    "shared memory off (no reranking, no updates)",
    "racer_jax.eval.ablations:no_memory"))
ABLATIONS.register("no_pruning", Ablation(
    "walker trained without semantic pruning (own walker + refiner run; "
    "without one: pruning off at inference)",
    "racer_jax.eval.ablations:no_pruning", {"walker.prune": False}))
ABLATIONS.register("single_path", Ablation(
    "one greedy path per choice instead of multi-path",
    "racer_jax.eval.ablations:single_path"))
ABLATIONS.register("no_teacher", Ablation(
    "walker trained with p_teacher = 0 (own walker + refiner run)",
    "racer_jax.eval.ablations:own_walker",
    {"train.p_teacher": 0.0, "train.p_teacher_final": 0.0}, needs=True))
ABLATIONS.register("hygrl", Ablation(
    "HyGRL's beam retriever as the GraphAgent (own run)",
    "racer_jax.hygrl.agent:ablation_graph_agent", {"method": "hygrl"},
    trainer="racer_jax.hygrl.stage:train", needs=True))


# Every registry whose field the config checks read.
BY_FIELD = {r.field: r for r in (LLM_BACKENDS, ANSWER_MODELS, GRAPH_AGENTS,
                                  METHODS, TRAIN_STAGES)}
