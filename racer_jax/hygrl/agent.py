"""HyGRL's beam retriever in the GraphAgent's place (``agents.graph=hygrl``).

The trained policy's greedy adaptive beam (one jitted program over the
batch, :func:`racer_jax.hygrl.search.make_retrieval_eval`) selects a subgraph
from the question concepts; on the host, the shortest paths inside that
subgraph from a question concept to each choice's concepts become the
choice's paths (shorter first). It keeps no shared memory.
"""

from __future__ import annotations

import collections
from pathlib import Path

import jax
import numpy as np

from racer_jax.agents.templates import Triple
from racer_jax.knowledge.path_text import RetrievedPath
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl import state as hygrl_state
from racer_jax.hygrl.state import create_state
from racer_jax.runs import run_config
from racer_jax.runs.checkpoints import restore_run

_SHARED = ("data", "kg", "grounding", "subgraph", "batch", "text")


def paths_in_selection(kg, batch, row: int, selected, keep: int,
                       num_choices: int) -> list[list[RetrievedPath]]:
  """Per choice, up to ``keep`` shortest paths (BFS over the selected
  nodes, edges in both stored directions) from a question node to a node
  of the choice."""
  nodes = batch.graphs.nodes
  concept = np.asarray(nodes["concept"][row])
  mask = np.asarray(batch.edge_mask[row])
  senders = np.asarray(batch.graphs.senders[row])[mask]
  receivers = np.asarray(batch.graphs.receivers[row])[mask]
  relation = np.asarray(batch.graphs.edges["relation"][row])[mask]
  edge_id = np.asarray(batch.graphs.edges["edge_id"][row])[mask]
  sel = np.asarray(selected)
  out_edges = collections.defaultdict(list)
  for s, r, rel, e in zip(senders, receivers, relation, edge_id):
    if sel[s] and sel[r]:
      out_edges[int(s)].append((int(r), int(rel), int(e)))
  starts = [int(i) for i in np.flatnonzero(
      np.asarray(nodes["is_question"][row]) & sel)]
  parent = {s: None for s in starts}
  queue = collections.deque(starts)
  while queue:
    u = queue.popleft()
    for v, rel, e in out_edges[u]:
      if v not in parent:
        parent[v] = (u, rel, e)
        queue.append(v)

  def path_to(v):
    hops = []
    while parent[v] is not None:
      u, rel, e = parent[v]
      hops.append(Triple(kg.concepts[int(concept[u])], kg.relations[rel],
                         kg.concepts[int(concept[v])], e))
      v = u
    return hops[::-1]

  choice_mask = np.asarray(batch.choice_mask[row])
  per_choice = []
  for c in range(num_choices):
    ends = [int(v) for v in np.flatnonzero(choice_mask[:, c])
            if int(v) in parent and parent[int(v)] is not None]
    paths = sorted((path_to(v) for v in ends), key=len)[:keep]
    per_choice.append([RetrievedPath(
        p, -float(len(p)), True,
        all(kg.has_edge(t.head, t.relation, t.tail) for t in p))
        for p in paths])
  return per_choice


class HyGRLGraphAgent:
  use_memory = False
  memory_source = "none"

  def __init__(self, hygrl_workdir, ws, rconfig, paths_per_choice: int = 2,
               log=print):
    hygrl_workdir = Path(hygrl_workdir)
    config = run_config.load(hygrl_workdir, "HyGRL run")
    for section in _SHARED:
      if config.get(section) != rconfig.get(section):
        raise ValueError(f"{hygrl_workdir}: its {section!r} settings differ "
                         "from the retrieval run's; train HyGRL on the same "
                         "data settings")
    policy, _, template = create_state(config, ws.concept_emb.shape[1])
    state, record, _ = restore_run(hygrl_workdir, template, "HyGRL",
                                   log=log)
    self._params = state.params
    self._theta = np.asarray(record["theta"], np.float32)
    self._eval = hygrl.make_retrieval_eval(policy,
                                           hygrl_state.hygrl_config(config))
    self.ws = ws
    self.keep = paths_per_choice
    self.temperature = 0.0

  def reset_memory(self):
    pass

  def record(self, paths, outcome) -> int:
    del paths, outcome  # no memory
    return 0

  def retrieve(self, batch, rng, temperature=None, examples=None):
    del rng, temperature, examples  # the greedy beam is deterministic
    out = jax.device_get(self._eval(self._params, batch, self.ws.concept_emb,
                                    self._theta))
    c = batch.choice_valid.shape[1]
    rows = [paths_in_selection(self.ws.kg, batch, b,
                               out["selected_policy"][b], self.keep, c)
            if batch.example_mask[b] else None
            for b in range(batch.example_mask.shape[0])]
    return out, rows


def hygrl_graph_agent(agents, refiner_dir, ws, keep, backend, *, encoder,
                      log):
  """``agents.graph=hygrl``: HyGRL's beam retriever of the run
  ``agents.hygrl_workdir``."""
  if not agents.hygrl_workdir:
    raise ValueError("agents.graph=hygrl needs agents.hygrl_workdir (a "
                     "run trained with --config.method=hygrl)")
  rconfig = run_config.load(refiner_dir, "refiner run")
  return HyGRLGraphAgent(agents.hygrl_workdir, ws, rconfig, keep, log=log)


def ablation_graph_agent(stack, run, log):
  """HyGRL's beam retriever of the ablation's HyGRL run."""
  return HyGRLGraphAgent(run, stack.ws, stack.rconfig, stack.keep, log=log)
