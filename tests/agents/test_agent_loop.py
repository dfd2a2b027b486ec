"""The collaboration loop end to end on the demo data: UNSURE ->
re-exploration -> ACCEPT, the no-consensus fallback, memory counts exactly
as the loop says, every reported triple in the KG — with the local models
and with the Gemini client against the stub server."""

import json
import re

import jax
import numpy as np
import pytest

from configs import test as test_config
from racer_jax.agents import answer_agent as answer_lib
from racer_jax.agents import critic as critic_lib
from racer_jax.agents import templates
from racer_jax.agents.agent_loop import Collaboration, FoldCritic
from racer_jax.agents.graph_agent import GraphAgent
from racer_jax.llm import gemini_backend, llm_usage
from tests.llm import llm_stubs
from tests.llm.stub_gemini import StubGemini, prompt_text


class ScriptedCritic:
  """UNSURE for the first ``unsure_turns`` judgements of each question."""

  name = "scripted"

  def __init__(self, unsure_turns):
    self.unsure_turns = unsure_turns
    self.seen = {}

  def judge_many(self, proposals):
    out = []
    for p in proposals:
      n = self.seen.get(p.index, 0)
      self.seen[p.index] = n + 1
      verdict = critic_lib.UNSURE if n < self.unsure_turns else (
          critic_lib.ACCEPT)
      out.append(critic_lib.Verdict(verdict, 0.5, "scripted", self.name))
    return out


@pytest.fixture(scope="module")
def parts(retrieval_runs, demo_workspace, answer_run):
  _, _, refiner_dir = retrieval_runs
  _, answer_dir = answer_run
  graph = GraphAgent(refiner_dir, demo_workspace, paths_per_choice=2,
                     log=lambda _: None)
  local = answer_lib.LocalAnswerer(answer_dir)
  data = demo_workspace.splits["dev"]
  return graph, local, data


def run(collab, data, seed=0):
  batch = data.dataset.batch_for_step(0, 0, 4)
  return collab.run_batch(batch, data.examples, jax.random.PRNGKey(seed))


def edge_counts(paths):
  counts = np.zeros(0)
  ids = [e for p in paths for e in p.edge_ids]
  return np.bincount(ids, minlength=1) if ids else counts


def test_unsure_then_accept_reexplores_and_counts(parts, demo_workspace):
  graph, local, data = parts
  graph.reset_memory()
  before = jax.device_get(graph.memory)
  collab = Collaboration(graph, local, ScriptedCritic(1), max_turns=3,
                         temperature_step=0.5, learn_from_labels=True)
  results = run(collab, data)
  after = jax.device_get(graph.memory)
  assert results
  rejected = np.zeros_like(before.rejection)
  success = np.zeros_like(before.success)
  failure = np.zeros_like(before.failure)
  kg = demo_workspace.kg
  for r in results:
    assert len(r.rounds) == 2 and r.accepted and r.deciding_turn == 1
    assert r.rounds[1].temperature == pytest.approx(
        r.rounds[0].temperature + 0.5)
    assert r.prediction == r.rounds[1].answer.choice
    for p in r.rounds[0].paths[r.rounds[0].answer.choice]:
      np.add.at(rejected, p.edge_ids, 1.0)
    target = success if r.correct else failure
    for p in r.evidence:
      np.add.at(target, p.edge_ids, 1.0)
    for t, verified in r.triples_shown():
      assert verified and kg.has_edge(t.head, t.relation, t.tail)
    d = r.to_dict()
    json.dumps(d)  # serializable
    assert d["rounds"][0]["verdict"] == "UNSURE"
    assert d["evidence_chains"] == [
        " ".join([p[0]["head"]] + [
            f"--{t['relation']}--> {t['tail']}" for t in p])
        for p in d["evidence"]]
  np.testing.assert_array_equal(after.rejection - before.rejection, rejected)
  np.testing.assert_array_equal(after.success - before.success, success)
  np.testing.assert_array_equal(after.failure - before.failure, failure)
  assert sum(r.memory_label_updates for r in results) == (
      success.sum() + failure.sum())


def test_by_default_labels_never_reach_the_memory(parts):
  """Only the critic's UNSURE (which needs no label) changes the memory
  unless the loop is told to learn from labels."""
  graph, local, data = parts
  graph.reset_memory()
  before = jax.device_get(graph.memory)
  results = run(Collaboration(graph, local, ScriptedCritic(1), max_turns=3),
                data)
  after = jax.device_get(graph.memory)
  assert results and all(r.gold is not None for r in results)
  assert all(r.memory_label_updates == 0 for r in results)
  np.testing.assert_array_equal(after.success, before.success)
  np.testing.assert_array_equal(after.failure, before.failure)
  assert after.rejection.sum() > before.rejection.sum()


def test_unsure_without_a_memory_is_counted_not_silent(parts,
                                                        retrieval_runs,
                                                        demo_workspace):
  """RACER's UNSURE penalizes the rejected paths in the shared memory; a
  graph agent without one cannot, and every such round is counted (the
  report says so) instead of passing for a penalty."""
  graph, local, data = parts
  graph.reset_memory()
  with_memory = run(Collaboration(graph, local, ScriptedCritic(1),
                                  max_turns=3), data)
  assert all(r.unsure_rounds == 1 and r.unsure_without_memory == 0
             for r in with_memory)
  _, _, refiner_dir = retrieval_runs
  bare = GraphAgent(refiner_dir, demo_workspace, paths_per_choice=2,
                    use_memory=False, log=lambda _: None)
  results = run(Collaboration(bare, local, ScriptedCritic(2), max_turns=3),
                data)
  assert results
  for r in results:
    assert r.unsure_rounds == 2 and r.unsure_without_memory == 2
    d = r.to_dict()
    assert (d["unsure_rounds"], d["unsure_without_memory"]) == (2, 2)


def test_no_consensus_falls_back_to_best_first_round(parts):
  graph, local, data = parts
  graph.reset_memory()
  collab = Collaboration(graph, local, ScriptedCritic(99), max_turns=3)
  for r in run(collab, data, seed=1):
    assert len(r.rounds) == 3 and not r.accepted
    first = r.rounds[0].answer.probs
    proposed = {x.answer.choice for x in r.rounds}
    assert r.prediction in proposed
    assert first[r.prediction] == max(first[c] for c in proposed)


def test_calibrated_critic_rule():
  conf = np.array([0.9, 0.8, 0.7, 0.3, 0.2, 0.25])
  support = np.array([1, 1, 0.5, 0, 0, 1.0])
  correct = np.array([1, 1, 1, 0, 0, 0], bool)
  c = critic_lib.LocalCritic.calibrate(conf, support, correct)
  accept = (conf >= c.min_confidence) & (support >= c.min_support)
  np.testing.assert_array_equal(accept, correct)  # separable: J = 1
  assert critic_lib.LocalCritic.calibrate(conf, support,
                                          np.ones(6, bool)).min_confidence == 0
  even, odd = critic_lib.LocalCritic(0.0), critic_lib.LocalCritic(1.1)
  fold = FoldCritic(even=even, odd=odd)
  req = answer_lib.AnswerRequest("q", ["a", "b"], ["", ""])
  a = answer_lib.Answer(0, 0.9, [0.9, 0.1], "", "", "", "local")
  verdicts = fold.judge_many([critic_lib.Proposal(req, a, 1.0, index=i)
                              for i in (0, 1)])
  assert [v.verdict for v in verdicts] == ["ACCEPT", "UNSURE"]


def loop_responder():
  """Answers choice 0; the critic is UNSURE the first time it sees a
  question and ACCEPTs after."""
  seen = {}

  def respond(system, text):
    if "check a proposed answer" in system:
      q = re.search(r"Question: (.*)", text).group(1)
      seen[q] = seen.get(q, 0) + 1
      verdict = "UNSURE" if seen[q] == 1 else "ACCEPT"
      return json.dumps({"verdict": verdict, "confidence": 0.7,
                         "reason": "scripted"})
    return json.dumps({"answer": 0, "confidence": 0.8,
                       "rationale": "the facts say so"})
  return respond


@pytest.mark.parametrize("kind", llm_stubs.KINDS)
def test_llm_loop_with_faults_falls_back_cleanly(parts, kind):
  graph, local, data = parts
  graph.reset_memory()
  # no cache: round 2 may repeat round 1's prompt
  with llm_stubs.stub_backend(kind, loop_responder()) as (stub, backend):
    # The first call hits a 500 (retried); another gets a malformed reply
    # (falls back to the local answerer).
    stub.script.append(llm_stubs.fault(kind, "server_error"))
    usage = llm_usage.UsageReport()
    answerer = answer_lib.LLMAnswerer(backend, local, usage)
    critic = critic_lib.LLMCritic(backend, critic_lib.LocalCritic(0.0),
                                  usage)
    collab = Collaboration(graph, answerer, critic, max_turns=3)
    results = run(collab, data)
    n = len(results)
    assert n and all(r.accepted and len(r.rounds) == 2 for r in results)
    assert all(r.rounds[0].verdict.verdict == "UNSURE" and
               r.rounds[1].verdict.verdict == "ACCEPT" for r in results)
    assert all(r.rounds[0].answer.backend == kind for r in results)
    assert usage.to_dict()["llm_calls"] == 4 * n  # 2 answers + 2 verdicts
    assert usage.input_tokens > 0
    # A malformed reply for one question: that answer comes from the local
    # model, the fallback is counted, the loop still finishes.
    stub.responder = lambda req: "{not json"  # (either stub's form)
    graph.reset_memory()
    usage2 = llm_usage.UsageReport()
    collab = Collaboration(
        graph, answer_lib.LLMAnswerer(backend, local, usage2),
        critic_lib.LLMCritic(backend, critic_lib.LocalCritic(0.0), usage2),
        max_turns=2)
    results = run(collab, data, seed=5)
    assert all(r.rounds[0].answer.backend == "local" for r in results)
    assert usage2.fallbacks == 2 * len(results)  # answer + verdict each
    assert usage2.errors["malformed_json"] == 2 * len(results)


@pytest.mark.slow  # a scripted exploration of every question
def test_explorer_serves_as_the_graph_agent(parts, demo_workspace,
                                            retrieval_runs):
  """agents.graph=explorer: the LLM explores with the graph functions and
  the triples it saw that touch a choice become that choice's evidence."""
  from racer_jax.agents.retrieval import build_graph_agent
  _, local, data = parts
  _, _, refiner_dir = retrieval_runs
  kg = demo_workspace.kg

  def respond(req):
    system = json.dumps(req.get("systemInstruction", {}))
    text = prompt_text(req)
    if "exploring a commonsense knowledge graph" in system:
      choices = re.search(r"Choices: (.*)", text).group(1).split("; ")
      n = text.count("<think>")
      if n < len(choices):  # look around each choice once
        node = choices[n].replace(" ", "_")
        rel = "_atlocation" if node in kg else "isa"
        return (f"<think>check {node}</think>"
                f"<graph>NeighbourCheck[{node}, {rel}]</graph>")
      return f"<think>done</think><answer>{choices[0]}</answer>"
    if "check a proposed answer" in system:
      return json.dumps({"verdict": "ACCEPT", "confidence": 0.9,
                         "reason": "ok"})
    return json.dumps({"answer": 0, "confidence": 0.6, "rationale": "r"})

  agents = test_config.get_config().agents
  agents.graph, agents.max_interactions = "explorer", 8
  with StubGemini(respond) as stub:
    backend = gemini_backend.GeminiBackend("m", api_key="k", base_url=stub.url)
    graph = build_graph_agent(agents, refiner_dir, demo_workspace, 2,
                              backend)
    usage = llm_usage.UsageReport()
    collab = Collaboration(
        graph, answer_lib.LLMAnswerer(backend, local, usage),
        critic_lib.LLMCritic(backend, critic_lib.LocalCritic(), usage),
        max_turns=2)
    results = run(collab, data)
  assert results and all(r.accepted for r in results)
  shown = [p for r in results for ps in r.rounds[0].paths for p in ps]
  assert shown  # the exploration found triples touching the choices
  for p in shown:
    assert len(p.triples) == 1 and p.verified
    t = p.triples[0]
    assert kg.has_edge(t.head, t.relation, t.tail)
  # the explorer's episodes reach the records and GraphDancer's figures
  from racer_jax.eval import qa_metrics
  figures = qa_metrics.question_metrics([r.to_dict() for r in results])
  assert figures["explorer_questions"] == len(results)
  assert figures["valid_format_rate"] == 1.0
  assert figures["unfinished_at_limit"] == 0.0
  assert figures["calls_per_question"] == pytest.approx(
      sum(len(r.choices) for r in results) / len(results))
  labeled = [r for r in results if r.gold is not None]
  assert figures["explorer_accuracy"] == pytest.approx(
      sum(r.gold == 0 for r in labeled) / len(labeled))
  with pytest.raises(ValueError, match="needs a text LLM"):
    build_graph_agent(agents, refiner_dir, demo_workspace, 2, None)


@pytest.mark.slow  # trains a HyGRL run
def test_hygrl_beam_serves_as_the_graph_agent(parts, demo_workspace,
                                              retrieval_runs,
                                              tmp_path_factory):
  """agents.graph=hygrl: shortest paths inside the beam's subgraph."""
  from racer_jax.agents.retrieval import build_graph_agent
  from racer_jax.hygrl import stage as hygrl_stage
  config, _, refiner_dir = retrieval_runs
  hconfig = config.copy_and_resolve_references()
  hconfig.method = "hygrl"
  workdir = tmp_path_factory.mktemp("hygrl") / "run"
  hygrl_stage.train(hconfig, None, workdir, progress=False,
                    log=lambda _: None)
  _, local, data = parts
  agents = test_config.get_config().agents
  agents.graph, agents.hygrl_workdir = "hygrl", str(workdir)
  graph = build_graph_agent(agents, refiner_dir, demo_workspace, 2, None,
                            log=lambda _: None)
  collab = Collaboration(graph, local, critic_lib.LocalCritic(0.0),
                         max_turns=1)
  results = run(collab, data)
  kg = demo_workspace.kg
  shown = [p for r in results for ps in r.rounds[0].paths for p in ps]
  assert results and shown
  for r in results:
    for c, ps in enumerate(r.rounds[0].paths):
      assert [len(p.triples) for p in ps] == sorted(len(p.triples)
                                                    for p in ps)
  for p in shown:
    assert p.verified and p.reached
    for a, b in zip(p.triples, p.triples[1:]):
      assert a.tail == b.head
    for t in p.triples:
      assert kg.has_edge(t.head, t.relation, t.tail)


def _demo_choice_triples(demo_workspace, retrieval_runs, data):
  """Two triples per choice of the demo dev questions."""
  from racer_jax.knowledge.choice_triples import ChoiceTriples
  from racer_jax.runs.workspace import make_encoder
  config, _, _ = retrieval_runs
  return ChoiceTriples(demo_workspace.kg, demo_workspace.concept_emb,
                       make_encoder(config)).split(data.examples,
                                                   data.subgraphs, 2)


def test_choice_triples_are_shown_first_and_reported(parts, demo_workspace,
                                                     retrieval_runs):
  graph, local, data = parts
  own = _demo_choice_triples(demo_workspace, retrieval_runs, data)
  graph.reset_memory()
  collab = Collaboration(graph, local, ScriptedCritic(0), max_turns=1,
                         choice_triples=own.__getitem__)
  kg, shown = demo_workspace.kg, 0
  for r in run(collab, data):
    first = r.rounds[0]
    assert first.choice_triples == own[r.index]
    for j, triples in enumerate(first.choice_triples):
      text = " ".join(templates.path_sentences(p.triples) for p in triples)
      assert first.knowledge[j].startswith(text)
      shown += len(triples)
    own_triples = [p.triples[0] for ps in first.choice_triples for p in ps]
    listed = [t for t, _ in r.triples_shown()]
    assert all(t in listed for t in own_triples)
    for t, verified in r.triples_shown():
      assert verified and kg.has_edge(t.head, t.relation, t.tail)
    d = r.to_dict()
    assert d["rounds"][0]["choice_triples"] == [
        [p.to_dict() for p in ps] for ps in first.choice_triples]
    assert d["evidence_choice_triples"] == [
        p.triples[0].to_dict() for p in first.choice_triples[r.prediction]]
    if first.choice_triples[r.prediction]:
      assert "what the graph says about the answer:" in r.explain()
  assert shown > 0



def test_paths_back_the_critic_not_an_answerer_trained_without_them(
    parts, demo_workspace, retrieval_runs):
  """``paths_to_answerer=False`` (an answer run trained without paths): the
  answerer sees only the choice triples, the critic's support and the
  evidence come from the GraphAgent's paths, UNSURE still re-explores."""
  from racer_jax.agents.agent_loop import support_of
  from racer_jax.knowledge.choice_triples import knowledge_text
  graph, local, data = parts
  own = _demo_choice_triples(demo_workspace, retrieval_runs, data)
  graph.reset_memory()
  before = jax.device_get(graph.memory)
  collab = Collaboration(graph, local, ScriptedCritic(1), max_turns=3,
                         choice_triples=own.__getitem__,
                         paths_to_answerer=False)
  results = run(collab, data)
  after = jax.device_get(graph.memory)
  rejected = np.zeros_like(before.rejection)
  paths_seen = 0
  for r in results:
    assert len(r.rounds) == 2 and r.accepted
    for rd in r.rounds:
      # exactly the triples' text: no path sentence reaches the answerer
      assert rd.knowledge == [knowledge_text(o, [], collab.max_sentences)
                              for o in own[r.index]]
      assert rd.support == support_of(rd.paths[rd.answer.choice])
      paths_seen += sum(len(ps) for ps in rd.paths)
    # the same input both rounds: the same answer
    assert r.rounds[0].answer.probs == r.rounds[1].answer.probs
    for p in r.rounds[0].paths[r.rounds[0].answer.choice]:
      np.add.at(rejected, p.edge_ids, 1.0)
    assert r.evidence == [p for p in r.rounds[1].paths[r.prediction]
                          if p.reached]
  assert paths_seen > 0
  np.testing.assert_array_equal(after.rejection - before.rejection, rejected)


def test_each_ensemble_view_is_shown_its_own_extra_text(parts):
  """Ensemble members trained with different extra text (here: one with a
  similar training question) each read their own view of every choice:
  that view's text, then the same triples and paths."""
  import copy
  graph, local, data = parts
  sim_member = copy.copy(local)
  sim_member.config = copy.deepcopy(local.config)
  sim_member.config.answer.similar_questions = 1
  ensemble = answer_lib.EnsembleAnswerer([local, sim_member])
  assert ensemble.member_view == [0, 1]
  similar = lambda i: [f"Similar question {i}: a cat sat."] * len(
      data.examples[i].choices)
  graph.reset_memory()
  collab = Collaboration(graph, ensemble, ScriptedCritic(0), max_turns=1,
                         extra_views=[None, similar])
  results = run(collab, data)
  assert results
  for r in results:
    rd = r.rounds[0]
    plain, with_similar = rd.knowledge_views
    assert plain == rd.knowledge
    assert with_similar == [" ".join(t for t in (s, k) if t) for s, k in
                            zip(similar(r.index), plain)]
    assert r.to_dict()["rounds"][0]["knowledge_views"] == rd.knowledge_views
    asked = [answer_lib.AnswerRequest(r.question, r.choices, view)
             for view in rd.knowledge_views]
    want = (local.probs(asked[:1])[0] + local.probs(asked[1:])[0]) / 2
    np.testing.assert_allclose(rd.answer.probs, want[:len(r.choices)],
                               atol=1e-5)
  # One view: no per-view record; requests without views are refused for
  # a member that needs its own.
  collab = Collaboration(graph, local, ScriptedCritic(0), max_turns=1)
  assert all(r.rounds[0].knowledge_views == [] for r in run(collab, data))
  with pytest.raises(ValueError, match="one knowledge text per view"):
    ensemble.probs([answer_lib.AnswerRequest("q", ["a", "b"], ["", ""])])


def test_retrieval_of_an_answer_run():
  from racer_jax.agents.retrieval import retrieval_of

  def ev(knowledge, evidence=""):
    config = test_config.get_config()
    config.answer.knowledge_workdir = knowledge
    config.answer.evidence_workdir = evidence
    return config

  def agents(retrieval):
    config = test_config.get_config().agents
    config.retrieval_workdir = retrieval
    return config

  run = ev
  assert retrieval_of(run("/r"), agents(""), "w") == ("/r", True)
  assert retrieval_of(run("/r"), agents("/r"), "w") == ("/r", True)
  assert retrieval_of(run(""), agents("/x"), "w") == ("/x", False)
  with pytest.raises(ValueError, match="trained on the paths of /r"):
    retrieval_of(run("/r"), agents("/x"), "w")
  with pytest.raises(ValueError, match="--retrieval_workdir"):
    retrieval_of(run(""), agents(""), "w")
  # an answerer reading the walker's evidence retrieves from that run
  assert retrieval_of(ev("", "/e"), agents(""), "w") == ("/e", False)
  assert retrieval_of(ev("/e", "/e"), agents("/e"), "w") == ("/e", True)
  with pytest.raises(ValueError, match="agents.retrieval_workdir=/x"):
    retrieval_of(ev("", "/e"), agents("/x"), "w")
  with pytest.raises(ValueError, match="answer.knowledge_workdir=/r"):
    retrieval_of(ev("/r", "/e"), agents(""), "w")
  # so does one reading the graph of that run's paths, and both must agree
  def graph(knowledge, evidence, graph_workdir):
    config = ev(knowledge, evidence)
    config.answer.graph_workdir = graph_workdir
    return config

  assert retrieval_of(graph("", "", "/g"), agents(""), "w") == ("/g", False)
  assert retrieval_of(graph("/g", "/g", "/g"), agents(""), "w") == ("/g",
                                                                   True)
  with pytest.raises(ValueError, match="answer.graph_workdir=/g is another"):
    retrieval_of(graph("", "/e", "/g"), agents(""), "w")
  with pytest.raises(ValueError, match="answer.knowledge_workdir=/r"):
    retrieval_of(graph("/r", "", "/g"), agents(""), "w")


class ChoiceEdges:
  """A GraphAgent a user might add, registered from this file alone: each
  choice's heaviest out-edges from its own concepts, as one-hop paths."""

  use_memory, memory_source, temperature = False, "none", 0.0

  def __init__(self, kg, keep):
    self.kg, self.keep = kg, keep

  def reset_memory(self):
    pass

  def record(self, paths, outcome) -> int:
    return 0

  def retrieve(self, batch, rng, temperature=None, examples=None):
    from racer_jax.knowledge.path_text import RetrievedPath, Triple
    concept = batch.graphs.nodes["concept"]
    out = [None] * batch.example_mask.shape[0]
    for b in np.flatnonzero(batch.example_mask):
      out[b] = []
      for c in range(batch.choice_valid.shape[1]):
        paths = []
        for i in concept[b][batch.choice_mask[b, :, c]]:
          if i < 0:
            continue
          e = self.kg.out_edges(int(i))
          for j in np.argsort(-e["weight"], kind="stable")[:self.keep]:
            paths.append(RetrievedPath([Triple(
                self.kg.concepts[int(i)], self.kg.relations[e["rel"][j]],
                self.kg.concepts[int(e["dst"][j])], int(e["edge_id"][j]))],
                float(e["weight"][j]), False, True))
        out[b].append(sorted(paths, key=lambda p: -p.score)[:self.keep])
    return {}, out


def test_a_graph_agent_registered_from_a_test_file(parts, demo_workspace,
                                                   retrieval_runs):
  from racer_jax.agents.retrieval import build_graph_agent
  from racer_jax.errors import ConfigError
  from racer_jax.runs import registry
  from racer_jax.runs.config_checks import check_config
  _, local, data = parts
  _, _, refiner_dir = retrieval_runs
  config = test_config.get_config()
  config.agents.graph = "choice_edges"
  with pytest.raises(ConfigError, match=r"agents.graph='choice_edges'.*"
                     r"'walker'"):
    check_config(config)
  registry.GRAPH_AGENTS.register(
      "choice_edges", lambda agents, refiner_dir, ws, keep, backend, *,
      encoder, log: ChoiceEdges(ws.kg, keep))
  try:
    check_config(config)
    graph = build_graph_agent(config.agents, refiner_dir, demo_workspace, 2,
                              None)
  finally:
    registry.GRAPH_AGENTS.unregister("choice_edges")
  results = run(Collaboration(graph, local, critic_lib.LocalCritic(0.0),
                              max_turns=1), data)
  kg = demo_workspace.kg
  shown = [p for r in results for ps in r.rounds[0].paths for p in ps]
  assert results and shown
  for r in results:
    for ps in r.rounds[0].paths:
      assert len(ps) <= 2
      for p in ps:
        t = p.triples[0]
        assert kg.has_edge(t.head, t.relation, t.tail)
