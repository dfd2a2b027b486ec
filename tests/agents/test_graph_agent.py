"""GraphAgent: refined paths per choice read back as KG triples, the
shared memory's rejection/success updates, and the cached knowledge files."""

import json

import jax
import numpy as np
import pytest

from racer_jax.answer import inputs as answer_inputs
from racer_jax.agents.graph_agent import GraphAgent, choice_evidence
from racer_jax.knowledge import knowledge_text
from racer_jax.errors import DataError
from racer_jax.memory import edge_memory
from tests.trained_runs import QUIET


@pytest.fixture(scope="module")
def agent(retrieval_runs, demo_workspace):
  _, _, refiner_dir = retrieval_runs
  return GraphAgent(refiner_dir, demo_workspace, paths_per_choice=2,
                    log=lambda _: None)


def test_paths_are_real_kg_triples_best_first(agent, demo_workspace):
  kg = demo_workspace.kg
  data = demo_workspace.splits["dev"]
  batch = data.dataset.batch_for_step(0, 0, 4)
  out, rows = agent.retrieve(batch, jax.random.PRNGKey(0))
  assert agent.use_memory  # the walker kept one
  seen = 0
  for b, choices in enumerate(rows):
    if choices is None:
      assert not batch.example_mask[b]
      continue
    example = data.examples[int(batch.example_index[b])]
    assert len(choices) == batch.choice_valid.shape[1]
    assert not any(choices[c] for c in range(len(example.choices),
                                             len(choices)))
    for paths in choices:
      assert len(paths) <= 2
      assert [p.score for p in paths] == sorted(
          (p.score for p in paths), reverse=True)
      for p in paths:
        assert p.verified and p.triples
        for t, nxt in zip(p.triples, p.triples[1:]):
          assert t.tail == nxt.head  # a connected walk
        for t in p.triples:
          # An independent look-up: the CSR row of the head holds this
          # (relation, tail) with this global edge id.
          row = kg.out_edges(t.head)
          hit = ((row["dst"] == kg.concept_id(t.tail)) &
                 (row["rel"] == kg.relation_id(t.relation)))
          assert hit.any() and t.edge_id in row["edge_id"][hit]
          seen += 1
  assert seen > 0


def test_choice_evidence_counts_each_choices_walks(agent, demo_workspace):
  data = demo_workspace.splits["dev"]
  batch = data.dataset.batch_for_step(0, 0, 4)
  out, rows = agent.retrieve(batch, jax.random.PRNGKey(1))
  c = batch.choice_valid.shape[1]
  per = agent._cfg.paths_per_choice
  any_reached = False
  for b in np.flatnonzero(batch.example_mask):
    evidence = choice_evidence(out, int(b), c)
    for j, e in enumerate(evidence):
      # a plain loop over the row's walks: those aimed at choice j
      walks = [p for p in range(out["choice"].shape[1])
               if out["choice"][b, p] == j]
      assert e["walks"] == len(walks) == per
      hits = [p for p in walks if out["reached"][b, p]]
      assert e["reached"] == len(hits)
      assert e["distinct"] == sum(bool(out["valid"][b, p]) for p in walks)
      if hits:
        any_reached = True
        assert e["best_log_prob"] == pytest.approx(
            max(float(out["log_prob"][b, p]) for p in hits))
      else:
        assert e["best_log_prob"] is None
      scored = [float(out["score"][b, p]) for p in walks
                if out["valid"][b, p]]
      assert e["best_score"] == (pytest.approx(max(scored)) if scored
                                 else None)
      # the kept paths' best score is the choice's best score over the
      # paths with a hop (a walk that starts on its target carries none)
      if rows[b][j]:
        assert rows[b][j][0].score == pytest.approx(max(
            float(out["score"][b, p]) for p in walks
            if out["valid"][b, p] and (out["edges"][b, p] >= 0).any()))
  assert any_reached


def test_rejection_and_success_counts_land_on_the_paths_edges(agent,
                                                              demo_workspace):
  batch = demo_workspace.splits["dev"].dataset.batch_for_step(0, 0, 4)
  _, rows = agent.retrieve(batch, jax.random.PRNGKey(1))
  paths = [p for choices in rows if choices for ps in choices for p in ps]
  before = jax.device_get(agent.memory)
  agent.record(paths[:3], edge_memory.REJECTION)
  agent.record(paths[3:4], edge_memory.SUCCESS)
  after = jax.device_get(agent.memory)
  want = np.zeros_like(before.rejection)
  for p in paths[:3]:
    np.add.at(want, p.edge_ids, 1.0)
  np.testing.assert_array_equal(after.rejection - before.rejection, want)
  want = np.zeros_like(before.success)
  np.add.at(want, paths[3].edge_ids, 1.0)
  np.testing.assert_array_equal(after.success - before.success, want)
  np.testing.assert_array_equal(after.failure, before.failure)
  # The penalized edges now score lower for the walker's reranking.
  q_before = edge_memory.quality(before)
  q_after = edge_memory.quality(after)
  rejected_only = np.setdiff1d(paths[0].edge_ids, paths[3].edge_ids)
  assert np.all(np.asarray(q_after)[rejected_only] <
                np.asarray(q_before)[rejected_only])


def test_knowledge_files_roundtrip_and_check_ids(retrieval_runs, tmp_path):
  _, _, refiner_dir = retrieval_runs
  got = answer_inputs.ensure_knowledge(refiner_dir, None, ["dev"], keep=2,
                                   batch_size=4, seed=0, **QUIET)
  path = knowledge_text.knowledge_file(refiner_dir, "dev", 2)
  lines = path.read_text().splitlines()
  assert len(lines) == len(got["dev"])
  assert any(p for q in got["dev"] for c in q for p in c)
  texts = knowledge_text.choice_texts(got["dev"], 3)
  assert all(len(t.split(". ")) <= 3 for q in texts for t in q if t)
  # A second call reads the file instead of retrieving again.
  stamp = path.stat().st_mtime_ns
  again = answer_inputs.ensure_knowledge(refiner_dir, None, ["dev"], keep=2,
                                     batch_size=4, seed=0, **QUIET)
  assert path.stat().st_mtime_ns == stamp
  assert [[[p.to_dict() for p in c] for c in q] for q in again["dev"]] == [
      [[p.to_dict() for p in c] for c in q] for q in got["dev"]]
  # A file that does not match the dataset is refused with its line.
  record = json.loads(lines[1])
  record["id"] = "someone-else"
  bad = tmp_path / "bad.jsonl"
  bad.write_text("\n".join([lines[0], json.dumps(record)] + lines[2:]) + "\n")
  examples = [type("E", (), {"id": json.loads(x)["id"]}) for x in lines]
  with pytest.raises(DataError, match=r"bad.jsonl:2: field 'id'"):
    knowledge_text.load_split(bad, examples)
  with pytest.raises(DataError, match="records for"):
    knowledge_text.load_split(bad, examples[:-1])
  # The walker's evidence is kept per choice beside the paths.
  evidence = answer_inputs.ensure_knowledge(refiner_dir, None, ["dev"], keep=2,
                                        batch_size=4, seed=0, evidence=True,
                                        **QUIET)["dev"]
  assert [len(e) for e in evidence] == [len(q) for q in got["dev"]]
  assert any(c["reached"] for q in evidence for c in q)
  for q, ev in zip(got["dev"], evidence):
    for paths, e in zip(q, ev):
      assert e["reached"] <= e["walks"] and e["distinct"] <= e["walks"]
      if any(p.reached for p in paths):
        assert e["reached"] > 0
  # a file written before the evidence was kept is refused, not guessed
  old = tmp_path / "old.jsonl"
  old.write_text("\n".join(json.dumps({k: v for k, v in json.loads(
      x).items() if k != "evidence"}) for x in lines) + "\n")
  assert knowledge_text.load_split(old, examples)  # its paths still read
  with pytest.raises(DataError, match=r"old.jsonl:1: field 'evidence'.*"
                     "delete it to rebuild"):
    knowledge_text.load_evidence(old, examples)


def test_lambda_is_chosen_on_the_validation_slice_and_used(agent,
                                                          retrieval_runs):
  """RACER's s = λα + (1 − λ)β: λ is chosen after training on questions
  the refiner never trained on, and the GraphAgent retrieves with it."""
  from racer_jax.refiner.evaluation import MIXES
  from racer_jax.runs import run_config
  config, _, refiner_dir = retrieval_runs
  chosen = run_config.load_dict(refiner_dir)[run_config.CHOSEN]
  sweep = {float(k): v for k, v in chosen["refiner_mix_validation"]}
  assert sorted(sweep) == list(MIXES) and chosen["refiner_mix_questions"] > 0
  best = max(sweep.values())
  ties = [lam for lam, v in sweep.items() if v == best]
  assert chosen["refiner_mix"] == min(
      ties, key=lambda lam: abs(lam - config.refiner.mix))
  assert agent.refiner.mix == chosen["refiner_mix"]


def test_a_questions_paths_do_not_depend_on_its_batch(agent, demo_workspace,
                                                     retrieval_runs):
  """Each question's walks draw from its own dataset index: retrieved with
  other questions, or alone, it gets the same paths (so --max_questions=N
  sees the full run's paths of those N)."""
  from racer_jax.agents.stack import subset
  config = retrieval_runs[0]
  data = demo_workspace.splits["dev"]
  rng = jax.random.PRNGKey(3)

  def paths_by_question(rows):
    part = subset(data, rows, config)
    out = {}
    for batch in part.dataset.ordered_batches(8):
      _, per_row = agent.retrieve(batch, rng)
      for b in np.flatnonzero(batch.example_mask):
        out[int(batch.example_index[b])] = [
            [(p.score, [t.edge_id for t in p.triples]) for p in choice]
            for choice in per_row[b]]
    return out
  together = paths_by_question(np.arange(8))
  apart = paths_by_question(np.array([5, 2, 7]))
  assert set(apart) == {2, 5, 7}
  for q in apart:
    assert apart[q] == together[q]
  assert any(any(choice) for choice in together[2])


def test_an_evaluations_first_questions_see_the_full_runs_paths(
    agent, demo_workspace, retrieval_runs):
  """The paths an evaluation shows a question (here the LM knowledge
  arm's) are the same in a --max_questions=N run as in the full run: the
  batch key holds no batch index, the draws are per question."""
  from racer_jax.agents.stack import subset
  from racer_jax.eval import lm_knowledge_arms
  config = retrieval_runs[0]
  data = demo_workspace.splits["dev"]
  full = lm_knowledge_arms.shown_paths(agent, data, 0, 4)
  first = lm_knowledge_arms.shown_paths(
      agent, subset(data, np.array([3, 7, 9]), config), 0, 4)
  assert set(first) == {3, 7, 9}
  for q in first:
    assert first[q] == full[q]
