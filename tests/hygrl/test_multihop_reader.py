"""The LLM reader over several retrievers' rankings (the OpenAI stub: a
reader that answers only when the answer's passage is shown)."""

import json
import types

import pytest

from configs import hygrl_2wiki
from racer_jax.errors import ConfigError
from racer_jax.hygrl import multihop_eval
from racer_jax.llm import llm_backends
from racer_jax.train import evaluate_run
from tests.llm import stub_openai

TITLES = ("Paris", "Lyon", "Rome", "Milan", "Oslo", "Bergen", "Madrid")
TEXTS = tuple(f"{t} is a city." for t in TITLES)
ANSWERS = ("France", "Italy", "Norway", "Spain")
# question i's answer is in passage ANSWER_PASSAGE[i]
ANSWER_PASSAGE = (0, 2, 4, 6)


def _workspace():
  questions = tuple(types.SimpleNamespace(
      id=f"q{i}", question=f"Which country is {TITLES[p]} in?", answer=a,
      gold=((p,),)) for i, (a, p) in enumerate(zip(ANSWERS, ANSWER_PASSAGE)))
  return types.SimpleNamespace(data=types.SimpleNamespace(
      titles=TITLES, texts=TEXTS, questions=questions))


def _reader(request):
  """Answers with the country of the first passage shown whose city the
  question names; else "unknown"."""
  text = stub_openai.user_text(request)
  passages, question = text.split("\n\nQuestion: ")
  for i, p in enumerate(ANSWER_PASSAGE):
    if f"] {TITLES[p]}:" in passages and TITLES[p] in question:
      return json.dumps({"answer": ANSWERS[i]})
  return json.dumps({"answer": "unknown"})


def test_each_ranking_gets_its_own_reader_and_the_paired_comparison(
    tmp_path):
  config = hygrl_2wiki.get_config()
  ws = _workspace()
  rows = list(range(4))
  # the policy shows every question's passage, BM25 the first two's,
  # dense none
  ranked = {"policy": [[p, 1, 3] for p in ANSWER_PASSAGE],
            "bm25": [[0, 1], [2, 3], [1, 3], [1, 5]],
            "dense": [[1, 3, 5]] * 4}
  with stub_openai.StubOpenAI(_reader, models=["m"]) as stub:
    agents = llm_backends.evaluation_agents(
        config, backend="openai", model="m", base_url=stub.url,
        settings=["max_concurrency=1"])
    records = {}
    figures = multihop_eval._llm_figures(
        agents, None, tmp_path, ws, rows, ranked,
        multihop_eval.check_reader_rankings(config, ["policy", "bm25",
                                                     "dense"]),
        0, records, log=lambda *_: None)
    sent = len(stub.requests)
  assert sent == 12                       # 4 questions x 3 rankings
  assert figures["reader_exact_match"] == 1.0
  assert figures["bm25_reader_exact_match"] == 0.5
  assert figures["dense_reader_exact_match"] == 0.0
  assert figures["dense_reader_f1"] == 0.0
  for name in ("reader", "bm25_reader", "dense_reader"):
    assert figures[f"{name}_failed_calls"] == 0
    assert figures[f"{name}_tokens_per_question"] > 0
  vs_bm25 = figures["reader_exact_match_minus_bm25"]
  assert vs_bm25["difference"] == 0.5
  assert (vs_bm25["a_only_correct"], vs_bm25["b_only_correct"]) == (0, 2)
  assert figures["reader_exact_match_minus_dense"]["difference"] == 1.0
  assert figures["reader_rankings"] == ["policy", "bm25", "dense"]
  assert records["q2"]["reader_answer"] == "Norway"
  assert records["q2"]["bm25_reader_answer"] == "unknown"
  assert records["q0"]["bm25_reader_f1"] == 1.0
  text = multihop_eval.report_text(
      {**figures, "dataset": "2wiki", "split": "dev", "questions": 4,
       "questions_exact": 4, "questions_rule": 0,
       "questions_multi_entity": 0, "encoder": "x", "step": 1,
       "questions_per_second": 1.0, "latency_p50_s": 0.1,
       "peak_rss_gb": 1.0}, (2, 5))
  assert "LLM reader over bm25's top 5 (4 questions): EM 0.500" in text
  assert "policy's minus this EM +0.500" in text


def test_reader_rankings_are_checked_before_any_work(tmp_path):
  config = hygrl_2wiki.get_config()
  for bad in (["policy", "tfidf"], ["bm25", "bm25"], [], ["reranker"]):
    with pytest.raises(ConfigError, match="--reader_rankings"):
      multihop_eval.check_reader_rankings(config, bad)
  config.multihop.relevance = "cross_encoder"
  assert multihop_eval.check_reader_rankings(
      config, ["reranker"]) == ("reranker",)
  # without an LLM there is no reader to choose for
  config.method = "hygrl_multihop"
  with pytest.raises(ConfigError, match="--reader_rankings chooses"):
    evaluate_run.evaluate_run(config, str(tmp_path), tmp_path,
                              {"reader_rankings": ["bm25"]}, progress=False)
