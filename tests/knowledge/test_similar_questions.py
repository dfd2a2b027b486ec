"""KEAR's similar training questions: nearest neighbours against a brute
force reference, the question itself never shown, the cache, and the text
the answer model is trained on."""

import json

import numpy as np
import pytest

from racer_jax.answer import inputs as answer_inputs
from racer_jax.knowledge import similar_questions as sq
from racer_jax.data import qa
from tests.trained_runs import QUIET


class BagOfWords:
  """A deterministic encoder: unit bag-of-words counts over a vocabulary
  hashed into 64 buckets; counts its calls."""

  def __init__(self):
    self.calls = 0

  def encode(self, texts):
    self.calls += 1
    out = np.zeros((len(texts), 64), np.float32)
    for i, t in enumerate(texts):
      for w in t.lower().replace(",", " ").replace("?", " ").split():
        out[i, sum(map(ord, w)) % 64] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def example(i, stem, choices, answer):
  return qa.QAExample(f"q{i}", stem, tuple(choices), answer)


INDEX = [
    example(0, "Where is a revolving door found?", ["bank", "mall", "zoo"], 0),
    example(1, "Where would a revolving door be useful?",
            ["bank", "mall", "zoo"], 1),
    example(2, "What do cats chase?", ["mice", "cars", "rain"], 0),
    example(3, "What do dogs like to chase?", ["cats", "mice", "cars"], 2),
    example(4, "Unlabeled revolving door question?", ["bank", "mall"], None),
]


def test_nearest_matches_brute_force_and_skips_itself():
  enc = BagOfWords()
  sim = sq.SimilarQuestions(INDEX, enc, log=QUIET["log"])
  assert [e.id for e in sim.index] == ["q0", "q1", "q2", "q3"]
  assert sim.skipped_unlabeled == 1
  queries = INDEX[:4] + [example(9, "A revolving door at the mall?",
                                 ["bank", "mall", "zoo"], 1)]
  got = sim.nearest(queries, 2)
  vec = enc.encode([sq.index_text(e) for e in sim.index])
  for q, row in zip(queries, got):
    s = enc.encode([sq.index_text(q)])[0] @ vec.T
    want = sorted((i for i in range(4) if sim.index[i].id != q.id),
                  key=lambda i: (-s[i], i))[:2]
    assert row == want
    assert q.id not in [sim.index[i].id for i in row]
  assert got[0][0] == 1 and got[1][0] == 0  # the sibling, never itself
  assert sim.nearest(queries, 0) == [[]] * 5


def test_shown_text_and_per_choice_layout():
  sim = sq.SimilarQuestions(INDEX, BagOfWords(), log=QUIET["log"])
  q = example(9, "Where is a revolving door?", ["bank", "zoo"], 0)
  text = sim.texts([q], 1)[0]
  assert text == ("Similar question: Where is a revolving door found? "
                  "Answer: bank.")
  assert sim.per_choice([q], 1) == [[text, text]]
  two = sim.texts([q], 2)[0]
  assert two.startswith(text + " Similar question: ")


def test_cache_is_reused_and_rebuilt_when_stale(tmp_path):
  cache = tmp_path / "sim.npz"
  enc = BagOfWords()
  first = sq.SimilarQuestions(INDEX, enc, cache, log=QUIET["log"])
  assert enc.calls == 1 and cache.exists()
  again = sq.SimilarQuestions(INDEX, enc, cache, log=QUIET["log"])
  assert enc.calls == 1  # read back, not embedded again
  np.testing.assert_array_equal(first.vectors, again.vectors)
  messages = []
  changed = INDEX[:3] + [example(3, "What do dogs chase?",
                                 ["cats", "mice", "cars"], 2)]
  sq.SimilarQuestions(changed, enc, cache, log=messages.append)
  assert enc.calls == 2 and any("stale" in m for m in messages)


def test_training_knowledge_puts_similar_questions_first(
    retrieval_runs, tmp_path, monkeypatch):
  config, _, _ = retrieval_runs
  config = config.copy_and_resolve_references()
  config.answer.knowledge_workdir = ""
  config.answer.choice_triples = 2
  own_only = answer_inputs.knowledge_for(config, None, ["train", "dev"],
                                        **QUIET)
  config.answer.similar_questions = 2
  config.answer.similar_encoder = "static"
  both = answer_inputs.knowledge_for(config, None, ["train", "dev"], **QUIET,
                                    cache_dir=tmp_path)
  assert (tmp_path / "similar_questions.npz").exists()
  train = answer_inputs.load_examples(config, None, "train")
  for split in ("train", "dev"):
    examples = answer_inputs.load_examples(config, None, split)
    for e, o_row, b_row in zip(examples, own_only[split], both[split]):
      assert len(b_row) == len(e.choices)
      first = b_row[0][:len(b_row[0]) - len(o_row[0])].strip()
      shown = [s for s in first.split(sq.PREFIX) if s.strip()]
      assert len(shown) == 2
      for b, o in zip(b_row, o_row):
        assert b == " ".join(t for t in (first, o) if t)
      for s in shown:  # each shown question is a labeled training one,
        stem, answer = s.strip().rsplit(" Answer: ", 1)
        hits = [t for t in train if t.stem == stem and t.id != e.id]
        assert hits, (split, e.id, stem)  # never the question itself
        assert any(answer == t.choices[t.answer_index] + "." for t in hits)


def test_bad_encoder_name_is_refused(retrieval_runs):
  from racer_jax.runs import config_checks
  config, _, _ = retrieval_runs
  config = config.copy_and_resolve_references()
  config.answer.similar_encoder = "bm25"
  with pytest.raises(Exception, match="similar_encoder"):
    config_checks.check_config(config)



@pytest.fixture(scope="module")
def similar_run(retrieval_runs, tmp_path_factory):
  """A short frozen-head answer run shown one similar question."""
  from tests.trained_runs import _train_answer
  return _train_answer(
      retrieval_runs, tmp_path_factory, "similar", model="frozen_head",
      head_epochs=2.0, head_batch_size=8, similar_questions=1,
      similar_encoder="static")


def shown_stems(knowledge: str) -> list[str]:
  """The stems of the similar questions at the start of a knowledge text."""
  assert knowledge.startswith(sq.PREFIX), knowledge
  return [s.split(" Answer: ")[0].strip()
          for s in knowledge.split(sq.PREFIX) if s.strip()]


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_pipeline_shows_the_similar_questions_it_was_trained_with(
    retrieval_runs, similar_run):
  from racer_jax.agents.pipeline import Pipeline
  _, workdir = similar_run
  assert (workdir / "similar_questions.npz").exists()
  train = answer_inputs.load_examples(retrieval_runs[0], None, "train")
  result = Pipeline(workdir, log=QUIET["log"]).answer(
      train[0].stem, list(train[0].choices))
  for shown in result.rounds[0].knowledge:
    # a new question (id "question") may be shown its training twin
    assert len(shown_stems(shown)) == 1
    assert shown_stems(shown)[0] in {e.stem for e in train}


@pytest.mark.slow  # the four-agent evaluation, two passes
def test_agents_evaluation_shows_them_too(retrieval_runs, similar_run,
                                          demo_workspace):
  from racer_jax.eval import agents_eval
  config, workdir = similar_run
  figures = agents_eval.evaluate(config, None, workdir, seeds=1, **QUIET)
  assert figures["similar_questions"] == 1
  train = {e.stem: e.id for e in answer_inputs.load_examples(
      retrieval_runs[0], None, "train")}
  rows = [json.loads(x) for x in (workdir / "eval" / "dev" /
                                  "full.seed0.jsonl").read_text().splitlines()]
  assert len(rows) == len(demo_workspace.splits["dev"].examples)
  for row in rows:
    for rd in row["rounds"]:
      for shown in rd["knowledge"]:
        stems = shown_stems(shown)
        assert len(stems) == 1 and train[stems[0]] != row["id"]


@pytest.mark.slow  # the four-agent evaluation of a two-model ensemble
def test_an_ensemble_shows_each_member_its_own_extra_text(
    retrieval_runs, similar_run, head_run, tmp_path):
  """A run shown no similar question and one shown one, averaged inside
  the loop: each member reads its own view (the same triples and paths,
  with or without the similar question before them)."""
  import shutil

  from racer_jax.agents.answer_agent import AnswerRequest, LocalAnswerer
  from racer_jax.agents.pipeline import Pipeline
  from racer_jax.eval import agents_eval
  config, plain = head_run
  plain_copy, similar_copy = tmp_path / "plain", tmp_path / "similar"
  for src, dst in ((plain, plain_copy), (similar_run[1], similar_copy)):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("eval"))
  figures = agents_eval.evaluate(config, None, plain_copy, seeds=1,
                                 ensemble=[similar_copy], **QUIET)
  assert figures["answer_member_views"] == [0, 1]
  members = [LocalAnswerer(plain_copy), LocalAnswerer(similar_copy)]
  rows = [json.loads(x) for x in (plain_copy / "eval" / "dev.ensemble" /
                                  "full.seed0.jsonl").read_text().splitlines()]
  assert rows
  for row in rows:
    for rd in row["rounds"]:
      bare, with_similar = rd["knowledge_views"]
      assert bare == rd["knowledge"]
      for b, s in zip(bare, with_similar):
        assert not b.startswith(sq.PREFIX) and len(shown_stems(s)) == 1
        assert s.endswith(b)
      want = np.mean([m.probs([AnswerRequest(row["question"],
                                             row["choices"], view)])[0]
                      for m, view in zip(members, (bare, with_similar))], 0)
      np.testing.assert_allclose(rd["probs"], want[:len(row["choices"])],
                                 atol=1e-5)
  # launch/answer.py's pipeline builds the same two views for a new
  # question.
  train = answer_inputs.load_examples(retrieval_runs[0], None, "train")
  result = Pipeline(plain_copy, ensemble=[str(similar_copy)],
                    log=QUIET["log"]).answer(train[0].stem,
                                             list(train[0].choices))
  bare, with_similar = result.rounds[0].knowledge_views
  assert bare == result.rounds[0].knowledge
  assert all(len(shown_stems(s)) == 1 and s.endswith(b)
             for b, s in zip(bare, with_similar))
