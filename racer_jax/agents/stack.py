"""An answer run's four agents, assembled once for any questions.

:class:`AgentStack` loads what the collaboration loop needs for the answer
run in ``workdir`` (or an ensemble led by it): the retrieval run it names
and that run's graph store, the GraphAgent, the AnswerAgent (local model,
ensemble, or an LLM in front of them), the extra text and choice triples
each answer model was trained with, and the shared memory the loop starts
from — the walker run's, or the answer run's memory pass over the training
split (``agents_memory/``, :mod:`racer_jax.eval.memory_pass`). Evaluation,
critic calibration, the memory pass and :class:`~racer_jax.agents.pipeline.
Pipeline` all build their loops here, so each shows the answerer the same input.

Splits: the evaluated one (or an ``eval_file``), ``validation()`` (the
critic's held-out slice of the training split) and ``training_questions()``.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from racer_jax.agents import critic as critic_lib
from racer_jax.agents import extra_knowledge, templates
from racer_jax.agents import few_shot as few_shot_lib
from racer_jax.agents.agent_loop import Collaboration
from racer_jax.agents.answer_agent import (EnsembleAnswerer, LLMAnswerer,
                                           LocalAnswerer)
from racer_jax.agents.critic import LLMCritic
from racer_jax.agents.retrieval import build_graph_agent, retrieval_of
from racer_jax.agents.scoring_agents import ScoringAnswerer, ScoringCritic
from racer_jax.knowledge import choice_triples
from racer_jax.data import datasets, qa, validation
from racer_jax.errors import ConfigError
from racer_jax.llm import llm_backends, llm_usage
from racer_jax.lm import scorers
from racer_jax.memory import edge_memory
from racer_jax.runs import builders, run_config
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.workspace import (SplitData, load_workspace, make_encoder,
                                      subset)

MEMORY_DIR = "agents_memory"  # the answer run's memory pass, if any
TRAIN_SPLIT_LOOP = "train_split_loop"


def eval_config(rconfig, data_dir, eval_file):
  """``(data config, split key)``: ``rconfig`` itself, or for an
  ``eval_file`` a copy whose splits are jsonl files, the file among them."""
  if not eval_file:
    return rconfig, None
  eval_file = Path(eval_file).resolve()
  if not eval_file.is_file():
    raise FileNotFoundError(f"--eval_file {eval_file} not found")
  # a field name and an eval folder of its own (q.v1, q_v1, ../q.v1 differ)
  key = (f"file_{re.sub(r'[^A-Za-z0-9_]', '_', eval_file.stem)}_"
         f"{hashlib.sha256(str(eval_file).encode()).hexdigest()[:8]}")
  rconfig = rconfig.copy_and_resolve_references()
  with rconfig.unlocked():
    files = dict(rconfig.data.files)
    if rconfig.data.dataset != "jsonl":
      files = {s: str(datasets.split_path(
          rconfig, s, datasets.resolve_data_dir(data_dir)))
               for s in rconfig.data.splits}
    files[key] = str(eval_file)
    rconfig.data.dataset = "jsonl"
    rconfig.data.files = files
  return rconfig, key


def memory_checkpoints(workdir) -> Path:
  return Path(workdir) / MEMORY_DIR / "checkpoints"


def load_train_memory(workdir, num_edges: int):
  """``(EdgeMemory, record)`` of the answer run's finished memory pass over
  the training split, or None when it has none."""
  folder = memory_checkpoints(workdir)
  if not folder.is_dir():
    return None
  ckpt = Checkpointer(folder)
  try:
    restored = ckpt.restore_latest(edge_memory.empty(num_edges),
                                   log=lambda _: None)
  finally:
    ckpt.close()
  if restored is None:
    return None
  return jax.tree.map(jnp.asarray, restored[0]), restored[1]


class AgentStack:
  """See the module docstring.

  Args:
    config: the answer run's config (``<workdir>/config.json``).
    workdir: the answer run; with ``ensemble``, more answer runs averaged
      with it by the AnswerAgent.
    agents: the agents' settings (default ``config.agents``).
    split, eval_file: the split to load at once (None: none; an
      ``eval_file`` becomes a jsonl split of the retrieval run's store).
  """

  def __init__(self, config, data_dir, workdir, *, agents=None,
               dry_run: bool = False, ensemble: Sequence[str] = (),
               api_key=None, split: str | None = None, eval_file=None,
               progress: bool = True, log: Callable[[str], None] = print):
    self.config, self.data_dir, self.workdir = config, data_dir, Path(workdir)
    self.agents = agents or config.agents
    self.progress, self.log = progress, log
    self.refiner_dir, self.paths_shown = retrieval_of(config, self.agents,
                                                      workdir)
    self.rconfig = run_config.load(self.refiner_dir, "retrieval run")
    # an eval_file is a split of a jsonl copy of the retrieval run's data
    # config; every other split is loaded with the run's own (its prepared
    # files' fingerprints stay valid)
    self.data_config, self._file_key = eval_config(self.rconfig, data_dir,
                                                   eval_file)
    self.split_key = self._file_key or split
    self.ws = load_workspace(
        self.data_config, data_dir,
        builders.prep_dir_of(self.rconfig, self.refiner_dir),
        [self.split_key] if self.split_key else [], progress=progress,
        log=log)
    self.encoder = make_encoder(self.rconfig)
    local = LocalAnswerer(workdir, log=log)
    if ensemble:
      local = EnsembleAnswerer([local] + [LocalAnswerer(w, log=log)
                                          for w in ensemble])
    self.local = local
    self.backend = llm_backends.make_backend(
        self.agents, api_key, cache_path=self.workdir / "llm_cache.sqlite",
        dry_run=dry_run)
    self.usage = llm_usage.UsageReport()
    # which LLM answers (None: the local models); every record carries it
    self.llm_identity = (self.backend.identity() if self.backend is not None
                         else None)
    self._few_shot = None
    # the refiner's k' (paths shown per choice): as chosen on the run's
    # validation slice (racer_jax/eval/paths_choice.py), else as trained
    self.keep_chosen = run_config.chosen(config, "refiner_top_k_chosen")
    self.keep = int(self.keep_chosen or config.answer.paths_per_choice)
    self.train_memory = None  # the memory pass's record, when it ran
    self.graph = self.prepare_graph(build_graph_agent(
        self.agents, self.refiner_dir, self.ws, self.keep, self.backend,
        encoder=self.encoder, log=log))
    # per view of the answerer: the text its members were shown before
    # the triples (one view unless ensemble members differ in it)
    self.extra = extra_knowledge.per_view(local, config, data_dir,
                                          self.workdir, self.ws,
                                          self.encoder, log)
    self.triples = None
    if config.answer.choice_triples > 0:
      self.triples = choice_triples.ChoiceTriples(
          self.ws.kg, self.ws.concept_emb, self.encoder)
    self._inputs, self._subsets = {}, {}
    self._scorer = None
    self.score_critic_min_accept = 0.5  # eval.calibration.fit_score_critic

  @property
  def members(self) -> list[str]:
    """The answer runs of the AnswerAgent, resolved."""
    return [str(Path(w).resolve())
            for w in getattr(self.local, "workdirs", [self.workdir])]

  @property
  def member_configs(self) -> list:
    return [m.config for m in getattr(self.local, "members", [self.local])]

  def prepare_graph(self, graph):
    """Starts ``graph`` (the system's or an ablation's walker) from the
    answer run's memory pass when it has one and keeps a memory."""
    if not getattr(graph, "use_memory", False):
      return graph
    found = load_train_memory(self.workdir, self.ws.kg.num_edges)
    if found is not None:
      graph.start_from(found[0], TRAIN_SPLIT_LOOP)
      self.train_memory = found[1]
    return graph

  def split(self, key: str) -> SplitData:
    """A split of the retrieval run's data, loaded once."""
    if key not in self.ws.splits:
      config = self.data_config if key == self._file_key else self.rconfig
      more = load_workspace(config, self.data_dir, self.ws.prep_dir, [key],
                            progress=self.progress, log=self.log)
      self.ws.splits[key] = more.splits[key]
    return self.ws.splits[key]

  def _train_rows(self) -> tuple[list, np.ndarray, np.ndarray]:
    """``(training split's examples, training rows, validation rows)``;
    every answer run of the AnswerAgent must hold out the same slice."""
    slices = {validation.slice_of(c) for c in self.member_configs}
    if len(slices) > 1:
      raise ConfigError(
          f"the answer runs {self.members} hold out different validation "
          f"slices {sorted(map(str, slices))} ({validation.FIELD}, "
          "answer.validation_seed): one critic cannot be calibrated on "
          "questions some of them trained on")
    for c, w in zip(self.member_configs, self.members):
      validation.require_slice(c, w)
    train = self.config.train.split
    data_dir = datasets.resolve_data_dir(self.data_dir)
    mine = datasets.split_path(self.config, train, data_dir)
    theirs = datasets.split_path(self.rconfig, train, data_dir)
    if mine.resolve() != theirs.resolve():
      raise ConfigError(f"{self.workdir} trained on {mine} but its retrieval "
                        f"run {self.refiner_dir} reads {theirs} as "
                        f"{train!r}: the validation slice would name other "
                        "questions")
    examples, _ = qa.load_jsonl(mine,
                                on_bad_line=self.config.data.on_bad_line)
    return (examples,) + validation.split_rows(self.config, len(examples))

  def validation_ids(self) -> set[str]:
    """The question ids of the validation slice (no subgraphs loaded)."""
    examples, _, val_rows = self._train_rows()
    return {examples[i].id for i in val_rows}

  def validation(self) -> SplitData:
    """The held-out slice of the training split the critic is fitted on
    (refused, with the field named, for runs without one)."""
    if "validation" not in self._subsets:
      _, _, val_rows = self._train_rows()
      self._subsets["validation"] = subset(
          self.split(self.config.train.split), val_rows, self.rconfig)
    return self._subsets["validation"]

  def training_questions(self, limit: int = 0) -> SplitData:
    """The training split without the validation slice (the first
    ``limit`` of them when > 0), for the memory pass."""
    _, train_rows, _ = self._train_rows()
    if limit > 0:
      train_rows = train_rows[:limit]
    return subset(self.split(self.config.train.split), train_rows,
                  self.rconfig)

  def inputs(self, data: SplitData):
    """``(per view: index -> [C] extra text, index -> [C] choice triples)``
    for the questions of ``data`` (built once per split)."""
    if id(data) not in self._inputs:
      ids = [int(i) for i in data.dataset.ids]
      examples = [data.examples[i] for i in ids]
      subgraphs = [data.subgraphs[i] for i in ids]
      texts = [e.texts(examples, subgraphs) for e in self.extra]
      views = [None if t is None else dict(zip(ids, t)).__getitem__
               for t in texts]
      own = None
      if self.triples is not None:
        own = dict(zip(ids, self.triples.split(
            examples, subgraphs, self.config.answer.choice_triples)))
        own = own.__getitem__
      self._inputs[id(data)] = (data, views, own)
    return self._inputs[id(data)][1:]

  def retrieval_saw_validation(self) -> bool:
    """Whether the walker or refiner run trained on the validation slice
    (runs from before the stack held it out, or with another slice): the
    critic's calibration data are then easier than the evaluated split."""
    mine = validation.slice_of(self.config)
    walker = Path(self.rconfig.refiner.walker_workdir)
    configs = [self.rconfig]
    if (walker / "config.json").is_file():
      configs.append(run_config.load(walker, "walker run"))
    return any(validation.slice_of(c) != mine or
               self.rconfig.train.split != self.config.train.split
               for c in configs)

  def forget(self, data: SplitData) -> None:
    """Drops what :meth:`inputs` built for ``data`` (one-off questions)."""
    self._inputs.pop(id(data), None)

  def memory_templates(self, graph):
    """The TemplateAgent for LLM prompts under ``graph``'s memory
    (:func:`templates.memory_renderer`; None with ``agents.template=plain``;
    ``llm`` rewrites through the backend)."""
    return templates.memory_renderer(
        graph, self.ws.kg.num_edges, self.agents.template,
        self.agents.rejected_edges, backend=self.backend,
        report=self.usage)

  def few_shot(self):
    """The LLM agents' worked examples from the validation slice's
    calibration pass for this setup (:func:`few_shot.from_calibration`);
    None with ``agents.few_shot=0``."""
    if self._few_shot is None:
      records = critic_lib.calibration_folder(
          self.workdir, self.calibration_identity()) / "validation.jsonl"
      self._few_shot = few_shot_lib.from_calibration(
          records, int(self.agents.few_shot),
          self.agents.few_shot_rule, int(self.config.seed),
          self.memory_templates(self.graph), self.config.text.model_dir)
    return self._few_shot or None

  def calibration_identity(self) -> dict:
    """What the critic's validation calibration depends on: a stored one
    is reused only for the same AnswerAgent, retrieval, memory and slice."""
    steps = self.local.step
    fraction, seed = validation.slice_of(self.config) or (None, None)
    return {
        "answer_members": self.members,
        "answer_steps": steps if isinstance(steps, list) else [steps],
        "retrieval_workdir": str(Path(self.refiner_dir).resolve()),
        "graph_agent": self.agents.graph,
        "hygrl_workdir": self.agents.hygrl_workdir,
        "paths_shown_to_answerer": self.paths_shown,
        "paths_per_choice": self.keep,
        "memory_source": self.graph.memory_source,
        "memory_questions": (self.train_memory or {}).get("questions"),
        "validation": {"split": self.config.train.split,
                       "fraction": fraction, "seed": seed},
        "seed": int(self.config.seed),
        "batch_size": int(self.config.eval.batch_size)}

  def set_paths_per_choice(self, k: int, chosen: bool = False) -> None:
    """Shows ``k`` refined paths per choice from now on (``chosen``: k was
    chosen on the validation slice)."""
    self.keep = self.graph.keep = int(k)
    if chosen:
      self.keep_chosen = int(k)

  def scorer(self):
    """The choice scorer of ``agents.answer_mode=score``: the jax
    backend's own, else a server's ``/v1/completions`` with prompt
    log-probs (refused at the first call where the server has none)."""
    if self._scorer is None:
      self._scorer = getattr(self.backend, "scorer", None)
      if self._scorer is None and self.agents.backend == "openai":
        self._scorer = scorers.make_scorer(
            "openai", model=self.agents.model,
            base_url=self.agents.base_url or None)
      if self._scorer is None:
        raise ConfigError(f"agents.answer_mode=score needs a model that "
                          f"scores: --backend=jax, or --backend=openai with "
                          "a server that returns prompt log-probs (not "
                          f"{self.agents.backend})")
    return self._scorer

  def collaboration(self, data: SplitData, critic, max_turns: int, *,
                    graph=None, local_only: bool = False,
                    learn_from_labels: bool = False,
                    record_score_critic: bool = False) -> Collaboration:
    """The loop over the questions of ``data`` with ``critic`` (an LLM
    critic in front of it with an LLM backend and more than one round;
    ``local_only``: the local models alone, as calibration and the memory
    pass run; ``record_score_critic``: score mode's critic judges a
    one-round pass too, accepting all, to record its P(ACCEPT))."""
    views, own = self.inputs(data)
    answerer = self.local
    render = identity = None
    if self.backend is not None and not local_only:
      identity = self.llm_identity
      render = self.memory_templates(graph or self.graph)
      shots = self.few_shot()
      show = bool(self.agents.show_paths)
      if self.agents.answer_mode == "score":
        scorer = self.scorer()
        answerer = ScoringAnswerer(scorer, self.usage,
                                   self.agents.score_metric, show)
        if record_score_critic:
          critic = ScoringCritic(scorer, self.usage, show, min_accept=0.0)
        elif max_turns > 1:
          critic = ScoringCritic(scorer, self.usage, show,
                                 self.score_critic_min_accept)
      else:
        answerer = LLMAnswerer(self.backend, self.local, self.usage, shots,
                               show_facts=show)
        if max_turns > 1:
          critic = LLMCritic(self.backend, critic, self.usage, shots,
                             show_facts=show)
    return Collaboration(graph or self.graph, answerer, critic,
                         max_turns=max_turns,
                         temperature_step=self.agents.temperature_step,
                         max_sentences=self.config.answer.max_sentences,
                         learn_from_labels=learn_from_labels,
                         extra_knowledge=views[0],
                         extra_views=views if len(views) > 1 else None,
                         choice_triples=own,
                         paths_to_answerer=self.paths_shown,
                         memory_templates=render, llm_identity=identity)
