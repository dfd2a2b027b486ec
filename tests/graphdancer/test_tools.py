"""GraphDancer: the graph functions on the demo KG, the strict step
parser on valid and broken transcripts, and the explorer loop driven by the
Gemini client against the stub server."""

import re

import numpy as np
import pytest

from racer_jax.graphdancer import explorer as explorer_lib
from racer_jax.graphdancer import tools
from racer_jax.graphdancer.tools import GraphTools, ProtocolError, ToolError
from tests.llm import llm_stubs


# -- the parser ----------------------------------------------------------
def test_parse_valid_steps():
  s = tools.parse_step("<think>find the bird</think>"
                       "<graph>NeighbourCheck[bird, capableof]</graph>")
  assert s.function == "NeighbourCheck" and s.args == ("bird", "capableof")
  assert s.think == "find the bird" and not s.is_answer
  s = tools.parse_step("\n <think>done</think>\n<answer> fly </answer>\n")
  assert s.is_answer and s.answer == "fly"
  s = tools.parse_step("<think>x</think><graph>RetrieveNode[ice cream]"
                       "</graph>")
  assert s.args == ("ice cream",)
  assert tools.parse_step("<think></think><graph>NodeFeature[]</graph>"
                          ).args == ()


@pytest.mark.parametrize("text,reason", [
    ("", "empty"),
    ("<graph>RetrieveNode[bird]</graph>", "missing <think>"),
    ("<think>hmm</think>", "no <graph> call"),
    ("<think>a</think>extra<graph>RetrieveNode[b]</graph>", "outside"),
    ("<think>a</think><graph>RetrieveNode[b]</graph> trailing", "outside"),
    ("<think>a</think><graph>RetrieveNode[b]</graph>"
     "<graph>RetrieveNode[c]</graph>", "outside"),
    ("<think>a</think><graph>RetrieveNode[b]", "outside"),
    ("<think>a <graph>x</think><answer>y</answer>", "inside <think>"),
    ("<think>a</think><graph>RetrieveNode(bird)</graph>", "Function"),
    ("<think>a</think><graph>RetrieveNode[[bird]]</graph>", "Function"),
    ("<think>a</think><answer>  </answer>", "empty"),
    ("<think>a</think><answer><b>x</b></answer>", "outside|tagged"),
])
def test_parse_broken_steps(text, reason):
  with pytest.raises(ProtocolError, match=reason):
    tools.parse_step(text)


# -- the functions ---------------------------------------------------------
@pytest.fixture(scope="module")
def graph_tools(demo_workspace):
  from racer_jax.text.static import StaticEncoder
  return GraphTools(demo_workspace.kg, StaticEncoder(),
                    demo_workspace.concept_emb, max_neighbours=3)


def test_functions_against_the_kg(graph_tools, demo_workspace):
  kg = demo_workspace.kg
  assert graph_tools.retrieve_node("Bird") == "bird"
  assert graph_tools.retrieve_node("brush teeth") == "brush_teeth"
  assert graph_tools.retrieve_node("birds") in kg  # embedding match
  c = kg.concept_id("bird")
  assert graph_tools.node_feature("bird", "degree") == str(kg.degree(c))
  rels = graph_tools.node_feature("bird", "relations").split(", ")
  assert set(rels) == {kg.relations[r] for r in kg.out_edges(c)["rel"]}
  assert graph_tools.node_feature("bird", "name") == "bird"
  want = int(np.sum(kg.out_edges(c)["rel"] == kg.relation_id("capableof")))
  assert graph_tools.node_degree("bird", "capableof") == str(want)
  obs, triples = graph_tools.call("NeighbourCheck", ["bird", "capableof"])
  assert {t.tail for t in triples} == {"fly", "sing"}
  assert obs == "[" + ", ".join(t.tail for t in triples) + "]"
  for t in triples:
    assert kg.has_edge(t.head, t.relation, t.tail)
  _, inverse = graph_tools.call("NeighbourCheck", ["bird", "_isa"])
  assert {"chicken", "penguin"} <= {t.tail for t in inverse}
  assert len(graph_tools.neighbours("animal", "_isa")) <= 3  # capped


@pytest.mark.parametrize("function,args,message", [
    ("NodeDegree", ["dragon", "isa"], "node 'dragon' does not exist"),
    ("NodeDegree", ["bird", "flies"], "relation 'flies' does not exist"),
    ("NodeFeature", ["bird", "colour"], "feature 'colour' does not exist"),
    ("Teleport", ["bird"], "unknown function"),
    ("NeighbourCheck", ["bird"], "takes 2 argument"),
    ("RetrieveNode", [""], "needs a keyword"),
    ("NodeFeature", ["no", "such node", "name"], "node 'no, such node'"),
])
def test_function_errors(graph_tools, function, args, message):
  with pytest.raises(ToolError, match=message):
    graph_tools.call(function, args)


# -- the explorer ----------------------------------------------------------
def scripted(steps_by_question):
  """Replies by question and step number (the count of observations)."""
  def respond(system, text):
    q = re.search(r"Question: (.*)", text).group(1)
    n = text.count("<think>")
    script = steps_by_question[q]
    return script[min(n, len(script) - 1)]
  return respond


@pytest.mark.parametrize("kind", llm_stubs.KINDS)
def test_explorer_outcomes_and_metrics(graph_tools, kind):
  script = {
      "What can a bird do?": [
          "<think>find it</think><graph>RetrieveNode[bird]</graph>",
          "<think>look</think><graph>NeighbourCheck[bird, capableof]"
          "</graph>",
          "<think>it flies</think><answer>fly</answer>"],
      "Where is a dragon?": [
          "<think>try</think><graph>NodeDegree[dragon, isa]</graph>",
          "<think>try again</think><graph>RetrieveNode[castle]</graph>"],
      "Broken?": ["I think the answer is B"],
      "Wrong?": ["<think>guess</think><answer>swim</answer>"],
  }
  questions = [("What can a bird do?", ["swim", "fly"], "fly"),
               ("Where is a dragon?", ["cave", "sky"], "cave"),
               ("Broken?", ["a", "b"], "a"),
               ("Wrong?", ["fly", "swim"], "fly")]
  with llm_stubs.stub_backend(kind, scripted(script)) as (_, backend):
    ex = explorer_lib.Explorer(backend, graph_tools, max_interactions=4)
    out = ex.run(questions)
  by_q = {t.question: t for t in out}
  bird = by_q["What can a bird do?"]
  assert bird.outcome == "correct" and bird.calls == 2
  assert bird.valid_calls == 2 and {e.tail for e in bird.evidence} == {
      "fly", "sing"}
  assert "<information>[" in bird.text
  dragon = by_q["Where is a dragon?"]
  assert dragon.outcome == "unfinished" and dragon.steps == 4
  assert dragon.calls == 4 and dragon.valid_calls == 3  # the error counts
  assert "Error: node 'dragon' does not exist" in dragon.observations[0]
  # GraphDancer: a step that breaks the protocol is answered with an error
  # and the episode goes on to the interaction limit
  broken = by_q["Broken?"]
  assert broken.outcome == "unfinished" and broken.steps == 4
  assert broken.valid_steps == 0 and len(broken.errors) == 4
  assert broken.text.count("<information>Error: ") == 4
  assert "I think the answer is B" in broken.text
  assert by_q["Wrong?"].outcome == "other_wrong"
  m = explorer_lib.metrics(out, [["fly"], ["cave"], ["a"], ["fly"]])
  assert m["outcome_correct"] == m["outcome_other_wrong"] == 0.25
  assert m["outcome_unfinished"] == m["unfinished_at_limit"] == 0.5
  assert m["outcome_invalid_protocol"] == 0
  # per question: every step of bird, dragon and wrong was well formed
  assert m["valid_format_rate"] == 0.75
  assert m["valid_step_rate"] == pytest.approx(8 / 12)  # 12 steps, 4 bad
  assert m["valid_call_rate"] == pytest.approx(5 / 6)
  assert m["calls_per_question"] == 1.5
  assert m["evidence_hit"] == 0.25  # only the bird saw its gold concept
  assert ex.report.calls == 12


@pytest.mark.parametrize("kind", llm_stubs.KINDS)
def test_llm_failure_ends_the_question_cleanly(graph_tools, kind):
  with llm_stubs.stub_backend(kind) as (stub, backend):
    stub.script.append(llm_stubs.fault(kind, "empty"))
    ex = explorer_lib.Explorer(backend, graph_tools)
    [t] = ex.run([("q?", ["a"], "a")])
  assert t.outcome == "invalid_protocol" and t.errors == ["llm: empty"]


def test_answer_matching():
  assert explorer_lib.match_choice("The Freezer.", ["oven", "freezer"]) == 1
  assert explorer_lib.match_choice("b", ["oven", "freezer"]) == 1
  assert explorer_lib.match_choice("1", ["oven", "freezer"]) == 1
  assert explorer_lib.match_choice("moon", ["oven", "freezer"]) is None
