"""The GraphAgents of the agents' ablations
(:data:`racer_jax.runs.registry.ABLATIONS`): ``build(stack, run, log)``
with ``stack`` the evaluation's :class:`~racer_jax.agents.stack.AgentStack`
and ``run`` the ablation's own trained run (``--ablation_workdirs=NAME=DIR``)
or None."""

from __future__ import annotations

from racer_jax.agents.graph_agent import GraphAgent


def _walker(stack, refiner_dir, log, **changes) -> GraphAgent:
  return GraphAgent(refiner_dir, stack.ws, paths_per_choice=stack.keep,
                    log=log, **changes)


def no_refiner(stack, run, log):
  """The full system's walker, its paths ranked by walker log-prob."""
  return _walker(stack, stack.refiner_dir, log, rank_by="logprob")


def no_memory(stack, run, log):
  """The shared memory off: no reranking, no updates."""
  return _walker(stack, stack.refiner_dir, log, use_memory=False)


def no_pruning(stack, run, log):
  """The run trained without pruning, else pruning off at inference."""
  if run:
    return _walker(stack, run, log)
  return _walker(stack, stack.refiner_dir, log,
                 rollout_overrides={"prune": False})


def single_path(stack, run, log):
  """One greedy path per choice."""
  return _walker(stack, stack.refiner_dir, log, refiner_overrides={
      "paths_per_choice": 1, "sample_hops": 0})


def own_walker(stack, run, log):
  """The ablation's own refiner run (over its own walker)."""
  return _walker(stack, run, log)
