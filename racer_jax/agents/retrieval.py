"""Which retrieval an answer run's agents use, and its GraphAgent.

:func:`retrieval_of` reads an answer run's config for the refiner run whose
paths the agents show (the one it was trained on, or a separate one for a
run trained without paths); :func:`build_graph_agent` builds the GraphAgent
``agents.graph`` names over it (registered in
:data:`racer_jax.runs.registry.GRAPH_AGENTS`): the jitted walker + memory +
refiner (HyGRL's beam retriever and GraphDancer's LLM explorer register
theirs from their rooms: :mod:`racer_jax.hygrl.agent`,
:mod:`racer_jax.graphdancer.explorer`).
"""

from __future__ import annotations

from pathlib import Path

from racer_jax.agents.graph_agent import GraphAgent
from racer_jax.runs import registry


def retrieval_of(config, agents, workdir) -> tuple[str, bool]:
  """``(refiner run, paths shown to the answerer)`` for the answer run
  ``config``: the run it was trained on (``answer.knowledge_workdir``; its
  paths are in the answerer's input), else ``agents.retrieval_workdir``
  (an answer run trained without paths: the GraphAgent's paths are the
  critic's support and the answer's evidence, not the answerer's input)."""
  trained = config.answer.knowledge_workdir
  extra = agents.retrieval_workdir
  read = [(name, run) for name, run in (
      ("answer.evidence_workdir", config.answer.evidence_workdir),
      ("answer.graph_workdir", config.answer.graph_workdir))
          if run]
  if read:
    # the answerer reads this run's walker evidence or its paths' graph:
    # the loop's GraphAgent must be that run, so re-exploration gives it
    # new evidence and new paths
    (what, run), others = read[0], read[1:]
    for name, other in (("answer.knowledge_workdir", trained),
                        ("agents.retrieval_workdir", extra), *others):
      if other and Path(other).resolve() != Path(run).resolve():
        raise ValueError(f"{workdir} reads the run in {what}={run}; "
                         f"{name}={other} is another run")
    return run, bool(trained)
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
                      encoder=None, log=print):
  """The GraphAgent ``agents.graph`` names
  (:data:`racer_jax.runs.registry.GRAPH_AGENTS`), built over the refiner
  run ``refiner_dir`` and the workspace ``ws``, showing ``keep`` paths per
  choice; ``backend``: the text LLM or None."""
  build = registry.GRAPH_AGENTS.get(agents.graph)
  return build(agents, refiner_dir, ws, keep, backend, encoder=encoder,
               log=log)


def walker_graph_agent(agents, refiner_dir, ws, keep, backend, *, encoder,
                       log):
  """``agents.graph=walker``: the jitted walker + memory + refiner."""
  return GraphAgent(refiner_dir, ws, paths_per_choice=keep, log=log)
