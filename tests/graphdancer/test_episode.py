"""GraphDancer's trained-explorer episode: the protocol's grammar over a
whole response, the paper's reward table, the environment's turns, and the
gold trajectories of the warm start, played through the real graph
functions on the demo workspace."""

import collections

import pytest

from racer_jax.graphdancer import episode as episode_lib
from racer_jax.graphdancer import trajectories
from racer_jax.graphdancer.episode import (Environment, Episode,
                                           RewardWeights, reward,
                                           valid_sequence)
from racer_jax.graphdancer.tools import GraphTools
from racer_jax.runs.workspace import load_workspace
from tests.trained_runs import QUIET

CALL = ("<think>a</think><graph>RetrieveNode[x]</graph>\n"
        "<information>x</information>\n")
ANSWER = "<think>so</think><answer>Bathroom</answer>"


@pytest.mark.parametrize("text,valid", [
    (ANSWER, True),
    (CALL + ANSWER, True),
    (CALL + CALL + "\n " + ANSWER + "\n", True),
    # an observation may quote protocol tags
    (CALL.replace("<information>x", "<information><think>x") + ANSWER, True),
    (CALL + "<information>more</information>" + ANSWER, True),
    ("", False),
    ("<answer>b</answer>", False),
    (CALL, False),                                   # never answers
    ("<think>a</think><graph>RetrieveNode[x]</graph>" + ANSWER, False),
    ("words " + ANSWER, False),
    (ANSWER + " more", False),
    (ANSWER + ANSWER, False),
    ("<think>a</think>x<answer>b</answer>", False),
    (CALL + "<information>open" + ANSWER, False),
])
def test_valid_sequence(text, valid):
  got, why = valid_sequence(text)
  assert got is valid, why
  assert bool(why) is not valid


def test_reward_table():
  w = RewardWeights(structure=0.2, final_format=0.1, retrieval=0.05)
  gold = ["bathroom"]
  broken = "junk " + ANSWER
  assert reward(CALL + ANSWER, gold, w) == 1.0
  assert reward(broken, gold, w) == pytest.approx(0.8)
  assert reward(CALL + ANSWER.replace("Bathroom", "kitchen"), gold, w) == (
      pytest.approx(0.2))
  assert reward(broken.replace("Bathroom", "kitchen"), gold, w) == (
      pytest.approx(0.1))
  assert reward(CALL, gold, w) == 0.0                 # no answer, invalid
  # the retrieval term: a gold answer seen in an observation
  seen = CALL.replace(">x<", ">the Bathroom<")
  assert reward(seen + ANSWER.replace("Bathroom", "kitchen"), gold, w) == (
      pytest.approx(0.25))
  # the last <answer> counts; SQuAD normalization
  assert episode_lib.final_answer("<answer>a</answer> <answer> The "
                                  "bathroom. </answer>") == "The bathroom."
  assert reward(CALL + "<think>x</think><answer>the bathroom!</answer>",
                gold) == 1.0


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory):
  from configs import test as test_config
  config = test_config.get_config()
  return load_workspace(config, None, tmp_path_factory.mktemp("prep"),
                        ["train"], **QUIET)


def test_environment_turns(demo_ws):
  env = Environment(GraphTools(demo_ws.kg), max_turns=3)
  ep = Episode("q?", [], ["bathroom"])
  obs = env.observe(ep, "<think>t</think><graph>NeighbourCheck[toothbrush, "
                        "atlocation]</graph>")
  assert obs == "\n<information>[bathroom]</information>\n"
  assert env.observe(ep, "no tags") .startswith("\n<information>Error: ")
  assert [s.by_model for s in ep.segments] == [True, False, True, False]
  assert (ep.turns, ep.valid_steps, ep.calls, ep.valid_calls) == (2, 1, 1, 1)
  assert ep.evidence[0].tail == "bathroom" and not ep.done
  # the third turn is the last: the episode ends unfinished, no observation
  assert env.observe(ep, "<think>t</think><graph>RetrieveNode[tooth]"
                         "</graph>") is None
  assert ep.end == "limit" and ep.segments[-1].by_model
  assert reward(ep.response, ep.golds) == 0.0
  done = Episode("q?", [], ["bathroom"])
  assert env.observe(done, ANSWER) is None
  assert (done.end, done.answer) == ("answer", "Bathroom")
  short = Environment(GraphTools(demo_ws.kg), shorten=lambda t: t[:3])
  ep = Episode("q?", [], [])
  assert short.observe(ep, "<think>t</think><graph>NodeFeature[toothbrush, "
                           "name]</graph>") == "\n<information>too"\
                                               "</information>\n"


def test_conceptnet_trajectories_replay_and_score_one(demo_ws):
  tools = GraphTools(demo_ws.kg)
  env = Environment(tools, max_turns=10)
  split = demo_ws.splits["train"]
  groups = collections.Counter()
  for example, subgraph in zip(split.examples, split.subgraphs):
    out = trajectories.conceptnet_trajectory(env, example, subgraph)
    if out is None:
      groups[None] += 1
      continue
    ep, hops = out
    groups[trajectories.difficulty_group(len(hops))] += 1
    assert ep.end == "answer" and reward(ep.response, ep.golds) == 1.0
    assert valid_sequence(ep.response) == (True, "")
    # each hop is an edge of the graph and was shown to the model
    for hop, obs in zip(hops, [s.text for s in ep.segments
                               if not s.by_model][1:]):
      assert demo_ws.kg.has_edge(hop.head, hop.relation, hop.tail)
      assert hop.tail in obs
    gold = example.choices[example.answer_index]
    assert ep.answer == gold and len(hops) <= 3
    nodes = set(subgraph.nodes[subgraph.choice_mask[:, example.answer_index]])
    assert demo_ws.kg.concept_id(hops[-1].tail) in nodes
  # the demo's questions are one- and two-hop
  assert groups["easy"] >= 20 and groups["medium"] >= 1, groups
  assert sum(groups.values()) == len(split.examples)


def test_shortest_visible_path_respects_the_listing_cap(demo_ws):
  tools = GraphTools(demo_ws.kg, max_neighbours=1)
  kg = demo_ws.kg
  c = kg.concept_id("toothbrush")
  for rel, dst in trajectories.visible_hops(tools, c):
    listed = tools.neighbours("toothbrush", kg.relations[rel])
    assert [t.tail for t in listed] == [kg.concepts[dst]]
  hops = trajectories.shortest_visible_path(
      GraphTools(kg), [c], [kg.concept_id("bathroom")], 1)
  assert [(h.head, h.tail) for h in hops] == [("toothbrush", "bathroom")]
  assert trajectories.shortest_visible_path(
      GraphTools(kg), [c], [kg.concept_id("bathroom")], 0) is None


def test_difficulty_groups():
  assert [trajectories.difficulty_group(h) for h in (1, 2, 3, 4, None)] == [
      "easy", "medium", "hard", "hard", "hard"]
