"""Gold trajectories in GraphDancer's protocol, for the supervised warm start.

This step is ours, not the paper's: GraphDancer starts PPO from an
instruction model that already follows the format, and SmolLM2-135M does not
(zero-shot it writes no well-formed step). Each trajectory is written from
what the project knows to be right about a *training* question and played
through the real :class:`~racer_jax.graphdancer.episode.Environment`, so every
observation in it is what the graph functions return:

* ConceptNet (choice questions): the shortest path the model could read —
  each hop among the neighbours ``NeighbourCheck`` lists (the heaviest
  ``max_neighbours`` per relation) and inside the question's subgraph — from
  a question concept to a concept of the gold choice, at most ``max_hops``
  hops: ``RetrieveNode`` of the first concept, ``NeighbourCheck`` along each
  hop, then the gold choice's text as the answer (a BFS teacher's path, as
  the walker's teacher gives it);
* a passage graph (2WikiMultiHopQA): the gold evidence's passages in order,
  each found by title (``RetrieveNode``) and read (``NodeFeature[P:title,
  text]``), then the gold answer.

The path's length sorts a question into GraphDancer's curriculum groups
(:func:`difficulty_group`).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Sequence

import numpy as np

from racer_jax.graphdancer.episode import Environment, Episode

GROUPS = ("easy", "medium", "hard")


@dataclasses.dataclass(frozen=True)
class Hop:
  head: str
  relation: str
  tail: str


def visible_hops(tools, concept: int, allowed: set[int] | None = None
                 ) -> list[tuple[int, int]]:
  """``(relation id, neighbour id)`` that ``NeighbourCheck[concept,
  relation]`` would list (the heaviest ``tools.max_neighbours`` per
  relation, ties in store order), kept to ``allowed`` nodes when given."""
  row = tools.kg.out_edges(concept)
  out = []
  for r in np.unique(row["rel"]):
    hit = np.flatnonzero(row["rel"] == r)
    hit = hit[np.argsort(-row["weight"][hit], kind="stable")]
    out += [(int(r), int(row["dst"][i])) for i in hit[:tools.max_neighbours]
            if allowed is None or int(row["dst"][i]) in allowed]
  return out


def shortest_visible_path(tools, sources: Sequence[int],
                          targets: Sequence[int], max_hops: int,
                          allowed: set[int] | None = None
                          ) -> list[Hop] | None:
  """A shortest path of visible hops (:func:`visible_hops`) from any of
  ``sources`` to any of ``targets`` (breadth first, sources and relations in
  id order, so the result is fixed), or None within ``max_hops``."""
  targets = set(int(t) for t in targets)
  parent: dict[int, tuple[int, int] | None] = {int(s): None for s in sources}
  frontier = list(parent)
  for _ in range(max_hops):
    nxt = []
    for node in frontier:
      for rel, dst in visible_hops(tools, node, allowed):
        if dst in parent:
          continue
        parent[dst] = (node, rel)
        if dst in targets:
          hops, at = [], dst
          while parent[at] is not None:
            prev, r = parent[at]
            hops.append(Hop(tools.kg.concepts[prev], tools.kg.relations[r],
                            tools.kg.concepts[at]))
            at = prev
          return hops[::-1]
        nxt.append(dst)
    frontier = nxt
  return None


def _say(name: str) -> str:
  return name.replace("_", " ")


def play(env: Environment, question: str, choices: Sequence[str],
         golds: Sequence[str], steps: Sequence[str]) -> Episode:
  """An :class:`Episode` of the scripted ``steps`` through ``env``."""
  episode = Episode(question, list(choices), list(golds))
  for step in steps:
    if episode.done:
      raise ValueError("a scripted step after the episode ended")
    env.observe(episode, step)
  return episode


def conceptnet_steps(hops: Sequence[Hop], answer: str) -> list[str]:
  """The protocol's steps along ``hops`` to ``answer``."""
  start = hops[0].head
  steps = [f"<think>The question is about {_say(start)}. I look for its "
           f"node.</think>\n<graph>RetrieveNode[{_say(start)}]</graph>"]
  for i, hop in enumerate(hops):
    seen = ("" if i == 0 else f"{_say(hop.head)} is among the "
            f"{hops[i - 1].relation} neighbours of {_say(hops[i - 1].head)}. ")
    steps.append(f"<think>{seen}I check the {hop.relation} neighbours of "
                 f"{_say(hop.head)}.</think>\n<graph>NeighbourCheck["
                 f"{hop.head}, {hop.relation}]</graph>")
  chain = ", ".join(f"{_say(h.head)} {h.relation} {_say(h.tail)}"
                    for h in hops)
  steps.append(f"<think>{chain}, so the answer is {answer}.</think>\n"
               f"<answer>{answer}</answer>")
  return steps


def conceptnet_trajectory(env: Environment, example, subgraph,
                          max_hops: int = 3):
  """``(Episode, hops)`` of a labeled choice question (``example``: a
  :class:`~racer_jax.data.qa.QAExample`, ``subgraph`` its
  :class:`~racer_jax.kg.subgraph.Subgraph`), or None when no visible path
  of at most ``max_hops`` hops (and short enough to play within the
  environment's turn limit: one lookup, the hops, the answer) joins a
  question concept to the gold choice."""
  if example.answer_index is None:
    return None
  gold = example.answer_index
  nodes = subgraph.nodes
  sources = sorted(int(c) for c in nodes[subgraph.is_question])
  targets = [int(c) for c in nodes[subgraph.choice_mask[:, gold]]]
  if not sources or not targets:
    return None
  max_hops = min(max_hops, env.max_turns - 2)
  hops = shortest_visible_path(env.tools, sources, targets, max_hops,
                               allowed={int(c) for c in nodes})
  if hops is None:
    return None
  answer = example.choices[gold]
  episode = play(env, example.stem, example.choices, [answer],
                 conceptnet_steps(hops, answer))
  return episode, hops


def passage_steps(titles: Sequence[str], answer: str) -> list[str]:
  """The protocol's steps reading the passages ``titles`` in order."""
  steps = []
  for i, title in enumerate(titles):
    why = ("The question names" if i == 0 else "The evidence leads to")
    steps.append(f"<think>{why} {title}. I find its passage.</think>\n"
                 f"<graph>RetrieveNode[{title}]</graph>")
    steps.append(f"<think>I read the passage of {title}.</think>\n"
                 f"<graph>NodeFeature[P:{title}, text]</graph>")
  steps.append(f"<think>The passages give the answer: {answer}.</think>\n"
               f"<answer>{answer}</answer>")
  return steps


def passage_trajectory(env: Environment, question, titles: Sequence[str]):
  """``(Episode, titles)`` reading the gold passages of a 2Wiki question
  (``titles``: the gold passages' titles in evidence order, each once), or
  None when a title is not a passage of the graph."""
  kept = list(collections.OrderedDict.fromkeys(titles))
  if not kept or any(env.tools.kg.get_concept_id(f"P:{t}") < 0
                     for t in kept):
    return None
  episode = play(env, question.question, [], [question.answer],
                 passage_steps(kept, question.answer))
  return episode, kept


def difficulty_group(hops: int | None) -> str:
  """GraphDancer's groups by the length of the gold trajectory: one hop
  (or one passage) easy, two medium, more (or none found) hard."""
  if hops is None or hops >= 3:
    return "hard"
  return GROUPS[max(hops, 1) - 1]
