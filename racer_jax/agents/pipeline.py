"""Answering new questions from a trained answer run.

:class:`Pipeline` loads the whole stack an answer run names (its refiner
run, that run's walker and graph store), grounds a new question and its
choices, extracts the subgraph, and runs the collaboration loop on it.
The critic uses the thresholds calibrated by the last agents evaluation of
the run (``<workdir>/eval/<name>/metrics.json``), else a plain 0.5 rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import jax
import ml_collections

from racer_jax.agents import extra_knowledge, llm
from racer_jax.agents.answer import EnsembleAnswerer, LLMAnswerer
from racer_jax.agents.answer import LocalAnswerer
from racer_jax.agents.critic import LLMCritic, LocalCritic
from racer_jax.agents.graph_agent import GraphAgent
from racer_jax.agents.loop import Collaboration, QuestionResult
from racer_jax.data import qa
from racer_jax.data.bucketed import BucketedDataset
from racer_jax.driver import common
from racer_jax.driver.inputs import load_workspace, make_encoder
from racer_jax.kg import grounding, subgraph


def calibrated_critic(workdir: Path, members: Sequence[str] = ()
                      ) -> tuple[LocalCritic, str]:
  """The thresholds fitted on all questions of the newest agents
  evaluation of ``workdir`` whose AnswerAgent was the same (this run alone,
  or the ensemble ``[workdir, *members]``), and where they came from."""
  want = [str(Path(m).resolve()) for m in [workdir, *members]]
  files = sorted((workdir / "eval").glob("*/metrics.json"),
                 key=lambda p: p.stat().st_mtime)
  for path in reversed(files):
    figures = json.loads(path.read_text())
    used = figures.get("answer_members", [str(Path(workdir).resolve())])
    fitted = figures.get("critic_thresholds", {})
    if "all" in fitted and used == want:
      return LocalCritic(*fitted["all"]), str(path)
  return LocalCritic(0.5, 0.0), "default (no agents evaluation yet)"


def retrieval_of(config, agents, workdir) -> tuple[str, bool]:
  """``(refiner run, paths shown to the answerer)`` for the answer run
  ``config``: the run it was trained on (``answer.knowledge_workdir``; its
  paths are in the answerer's input), else ``agents.retrieval_workdir``
  (an answer run trained without paths: the GraphAgent's paths are the
  critic's support and the answer's evidence, not the answerer's input)."""
  trained = config.answer.knowledge_workdir
  extra = agents.get("retrieval_workdir", "")
  if trained and extra and Path(extra).resolve() != Path(trained).resolve():
    raise ValueError(
        f"{workdir} was trained on the paths of {trained}; "
        f"agents.retrieval_workdir={extra} would show it other paths than "
        "it learned from (the option is for runs trained without paths)")
  if trained:
    return trained, True
  if extra:
    return extra, False
  raise ValueError(f"{workdir}: this answer run has no retrieval "
                   "(answer.knowledge_workdir is empty); the agents need one "
                   "— pass a refiner run as --retrieval_workdir (its paths go "
                   "to the critic, not to this answerer), train the answer "
                   "stage with knowledge, or evaluate the answer model alone "
                   "with --answer_only")


def build_graph_agent(agents, refiner_dir, ws, keep: int, backend, *,
                      encoder=None, log=print, **kwargs):
  """The GraphAgent named by ``agents.graph``: ``walker`` (the jitted
  walker + memory + refiner), ``hygrl`` (HyGRL's beam retriever of the run
  ``agents.hygrl_workdir``) or ``explorer`` (GraphDancer's LLM explorer over
  the graph functions; needs a text LLM backend)."""
  kind = agents.get("graph", "walker")
  if kind == "walker":
    return GraphAgent(refiner_dir, ws, paths_per_choice=keep, log=log,
                      **kwargs)
  if kind == "explorer":
    from racer_jax.agents.explorer import Explorer, ExplorerGraphAgent
    from racer_jax.agents.tools import GraphTools
    if backend is None:
      raise ValueError("agents.graph=explorer needs a text LLM: "
                       "--backend=gemini")
    tools = GraphTools(ws.kg, encoder, ws.concept_emb)
    return ExplorerGraphAgent(
        Explorer(backend, tools, agents.get("max_interactions", 8)), ws.kg,
        paths_per_choice=keep)
  if kind == "hygrl":
    from racer_jax.agents.hygrl_agent import HyGRLGraphAgent
    if not agents.get("hygrl_workdir"):
      raise ValueError("agents.graph=hygrl needs agents.hygrl_workdir (a "
                       "run trained with --config.method=hygrl)")
    rconfig = ml_collections.ConfigDict(json.loads(
        (Path(refiner_dir) / "config.json").read_text()))
    return HyGRLGraphAgent(agents.hygrl_workdir, ws, rconfig, keep, log=log)
  raise ValueError(f"agents.graph={kind!r}: expected walker, explorer or "
                   "hygrl")


class Pipeline:
  def __init__(self, workdir, data_dir=None, *, agents=None, api_key=None,
               ensemble: Sequence[str] = (),
               log: Callable[[str], None] = print):
    """``ensemble``: more answer runs shown this run's triples and paths
    (each with its own extra text), averaged with it by the AnswerAgent."""
    self.workdir = Path(workdir)
    config = ml_collections.ConfigDict(json.loads(
        (self.workdir / "config.json").read_text()))
    agents = agents or config.agents
    refiner_dir, paths_shown = retrieval_of(config, agents, workdir)
    rconfig = ml_collections.ConfigDict(json.loads(
        (Path(refiner_dir) / "config.json").read_text()))
    self.config, self.rconfig = config, rconfig
    ws = load_workspace(rconfig, data_dir,
                        common.prep_dir_of(rconfig, refiner_dir), [],
                        progress=False, log=log)
    self.ws = ws
    self._grounder = grounding.Grounder(
        ws.kg.concepts,
        max_concept_tokens=rconfig.grounding.max_concept_tokens,
        max_candidates_per_span=rconfig.grounding.max_candidates_per_span)
    self._extractor = subgraph.SubgraphExtractor(
        ws.kg, **rconfig.subgraph.to_dict())
    self._encoder = make_encoder(rconfig)
    self.usage = llm.UsageReport()
    local = LocalAnswerer(self.workdir, log=log)
    if ensemble:
      local = EnsembleAnswerer([local] + [LocalAnswerer(w, log=log)
                                          for w in ensemble])
    critic, self.critic_source = calibrated_critic(self.workdir, ensemble)
    backend = llm.make_backend(agents, api_key, cache_path=self.workdir /
                               "llm_cache.sqlite")
    self.graph = build_graph_agent(
        agents, refiner_dir, ws, config.answer.paths_per_choice, backend,
        encoder=self._encoder, log=log)
    answerer = local
    if backend is not None:
      answerer = LLMAnswerer(backend, local, self.usage)
      critic = LLMCritic(backend, critic, self.usage)
    # per view of the answerer: the text its members were shown before
    # the triples (one view unless ensemble members differ in it)
    self._extra = extra_knowledge.per_view(local, config, data_dir,
                                           self.workdir, ws, self._encoder,
                                           log)
    self._own = None
    if config.answer.get("choice_triples", 0) > 0:
      from racer_jax.agents import choice_triples
      self._own = choice_triples.ChoiceTriples(ws.kg, ws.concept_emb,
                                               self._encoder)
    self.collab = Collaboration(self.graph, answerer, critic,
                                max_turns=agents.max_turns,
                                temperature_step=agents.temperature_step,
                                max_sentences=config.answer.max_sentences,
                                learn_from_gold=False,
                                paths_to_answerer=paths_shown)

  def answer(self, question: str, choices: Sequence[str],
             seed: int = 0) -> QuestionResult:
    choices = [c.strip() for c in choices if c.strip()]
    num_choices = self.rconfig.batch.num_choices
    if not 2 <= len(choices) <= num_choices:
      raise ValueError(f"give 2 to {num_choices} choices, got "
                       f"{len(choices)}")
    g = self._grounder.ground(question, choices)
    sg = self._extractor.extract(g.question_concepts, g.choice_concepts)
    dataset = BucketedDataset(
        [sg], [None], self._encoder.encode([question]),
        buckets=[tuple(b) for b in self.rconfig.batch.buckets],
        num_choices=num_choices,
        max_degree=self.rconfig.subgraph.max_degree)
    batch = next(dataset.ordered_batches(1))
    example = qa.QAExample("question", question, tuple(choices), None)
    extras = extra_knowledge.callables([e.texts([example], [sg])
                                        for e in self._extra])
    self.collab.extra_knowledge = extras[0]
    self.collab.extra_views = extras if len(extras) > 1 else None
    if self._own is not None:
      own = self._own.split([example], [sg],
                            self.config.answer.choice_triples)
      self.collab.choice_triples = own.__getitem__
    return self.collab.run_batch(batch, [example],
                                 jax.random.PRNGKey(seed))[0]
