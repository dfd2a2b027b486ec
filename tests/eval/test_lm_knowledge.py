"""The LM knowledge measurement: its arms (the content control is a
derangement with the same counts, the format control draws real triples of
the same count), how knowledge is written, and the whole evaluation on a
trained demo answer run with a tiny GGUF model in JAX."""

import json
import shutil

import numpy as np
import pytest

from racer_jax.knowledge.path_text import Triple
from racer_jax.data import datasets
from racer_jax.errors import ConfigError
from racer_jax.eval import lm_knowledge_arms as arms
from racer_jax.kg import ingest, store

T = lambda h, r, t: Triple(h, r, t, 0)


def _paths():
  return {
      0: [[[T("a", "isa", "b")], [T("a", "isa", "c"), T("c", "_partof",
                                                        "d")]], []],
      1: [[[T("x", "usedfor", "y")]], [[T("y", "atlocation", "z")]]],
      2: [[], [[T("p", "causes", "q")]]],
      3: [[[T("m", "desires", "n")], [T("n", "isa", "o")]], [[T("o", "isa",
                                                                "m")]]],
  }


def test_other_paths_come_from_other_questions_in_the_same_counts():
  paths = _paths()
  other = arms.other_paths(paths, seed=0)
  for q, per_choice in paths.items():
    own = {id(p) for ps in per_choice for p in ps}
    for mine, theirs in zip(per_choice, other[q]):
      assert len(theirs) == len(mine)
      assert not own & {id(p) for p in theirs}
  assert arms.other_paths(paths, seed=0) == other
  assert arms.other_paths(paths, seed=1) != other or len(paths) < 3


def test_random_triples_are_real_edges_in_the_paths_counts():
  triples, _ = ingest.read_triple_files(datasets.DEMO_DIR / "kg.tsv")
  kg, _ = store.build_graph(triples)
  paths = _paths()
  drawn = arms.random_triples(paths, kg, seed=3)
  index = {name: i for i, name in enumerate(kg.concepts)}
  rel = {name: i for i, name in enumerate(kg.relations)}
  for q, per_choice in paths.items():
    for mine, theirs in zip(per_choice, drawn[q]):
      assert len(theirs) == sum(map(len, mine))
      for (t,) in theirs:
        assert not t.relation.startswith("_")
        assert kg.has_edge(index[t.head], rel[t.relation], index[t.tail])


def test_knowledge_text_takes_each_choice_in_turn_up_to_the_cap():
  facts = _paths()[0] + [["An open-book fact"]]
  text = arms.knowledge_text(["b", "e", "f"], facts, "triples", cap=3)
  assert text.splitlines() == ["a isa b.", "An open-book fact.", "a isa c."]
  sentences = arms.knowledge_text(["b", "e", "f"], facts, "sentences", 10)
  assert "D is part of c." in sentences.splitlines()
  per = arms.knowledge_text(["b", "e", "f"], facts, "per_choice", 10)
  assert per.splitlines()[0].startswith("About b: A is a kind of b.")
  assert len(per.splitlines()) == 2           # choice e has no facts
  assert arms.knowledge_text(["b"], [[]], "per_choice", 5) == ""
  with pytest.raises(ValueError):
    arms.knowledge_text(["b"], [[]], "prose", 5)


def _arms_dir(run):
  return run / "eval" / "dev" / "lm_knowledge" / "jax-tiny.gguf"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
  pytest.importorskip("tunix", reason="the LM extra: pip install -e '.[lm]'")
  from tests.lm import tiny_gguf
  path = tmp_path_factory.mktemp("lm") / "tiny.gguf"
  tiny_gguf.write_tiny_llama(path)
  return str(path)


@pytest.mark.slow  # ~60 s to train the demo answer run, ~25 s to score
def test_every_arm_scored_on_a_trained_answer_run(head_run, retrieval_runs,
                                                  tiny_model, tmp_path):
  from racer_jax.train import evaluate_run
  _, workdir = head_run
  run = tmp_path / "run"
  shutil.copytree(workdir, run, ignore=shutil.ignore_patterns("eval"))
  config = evaluate_run.load_run_config(run)
  # the answer run's own refiner as an "ablation": its arm must be the
  # paths arm, question by question
  options = {"lm_knowledge": True, "backend": "jax", "model": tiny_model,
             "lm_validation_questions": 6,
             "ablation_workdirs": [f"same={retrieval_runs[2]}"]}
  figures = evaluate_run.evaluate_run(config, None, run, options,
                                      progress=False)
  n = figures["questions"]
  assert n > 0
  for arm in ("none", "paths", "other_paths", "random_triples",
              "choice_triples"):
    for metric in ("acc", "acc_norm", "acc_pmi"):
      assert 0.0 <= figures[f"lm_{metric}_{arm}"] <= 1.0
    rows = (_arms_dir(run) / f"{arm}.jsonl"
            ).read_text().splitlines()[1:]
    assert len(rows) == n
    hits = [json.loads(r)["predictions"]["acc_norm"] == json.loads(r)["gold"]
            for r in rows]
    assert figures[f"lm_acc_norm_{arm}"] == pytest.approx(np.mean(hits))
  assert "lm_acc_openbook" not in figures         # not an OBQA run
  assert figures["lm_paths_minus_none"] == pytest.approx(
      figures["lm_acc_norm_paths"] - figures["lm_acc_norm_none"])
  assert figures["lm_helped"] - figures["lm_hurt"] == round(
      figures["lm_paths_minus_none"] * n)
  assert len(figures["lm_validation_grid"]) == 6
  assert figures["lm_acc_norm_paths_same"] == figures["lm_acc_norm_paths"]
  assert figures["lm_paths_minus_paths_same"] == 0.0
  read = lambda arm: [json.loads(r)["knowledge"] for r in (
      _arms_dir(run) / f"{arm}.jsonl"
  ).read_text().splitlines()[1:]]
  assert read("paths_same") == read("paths") != read("other_paths")
  none = [json.loads(r) for r in (_arms_dir(run) / "none.jsonl"
                                  ).read_text().splitlines()[1:]]
  assert all(r["knowledge"] == "" for r in none)
  # a rerun reuses every arm's scores and reports the same figures
  again = evaluate_run.evaluate_run(config, None, run, options,
                                    progress=False)
  assert {k: v for k, v in again.items() if k != "machine"} == {
      k: v for k, v in figures.items() if k != "machine"}
  # a retrieval that now shows other paths (here none) is scored again,
  # not reused; the arms whose knowledge did not change are reused
  from racer_jax.eval import lm_knowledge_arms
  assert figures["lm_questions_with_paths"] > 0
  before = read("paths")
  assert any(before)
  nothing = lambda graph, data, *a, **k: {
      int(i): [[] for _ in data.examples[int(i)].choices]
      for i in data.dataset.ids}
  none_file = (_arms_dir(run) / "none.jsonl").stat().st_mtime_ns
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(lm_knowledge_arms, "shown_paths", nothing)
    changed = evaluate_run.evaluate_run(config, None, run, {
        **options, "lm_format": f"{figures['lm_format']}:"
        f"{figures['lm_fact_cap']}"}, progress=False)
  assert read("paths") == [""] * n != before
  assert changed["lm_acc_norm_paths"] == changed["lm_acc_norm_none"]
  assert (_arms_dir(run) / "none.jsonl").stat().st_mtime_ns == none_file


def test_options_that_do_not_apply_are_refused(tmp_path):
  from configs import test as test_config
  from racer_jax.train import evaluate_run
  config, workdir = test_config.get_config(), tmp_path
  config.train.stage = "answer"
  tiny_model = str(tmp_path / "tiny.gguf")    # refused before it is read
  with pytest.raises(ConfigError, match="--seeds does not apply"):
    evaluate_run.evaluate_run(config, None, workdir, {
        "lm_knowledge": True, "model": tiny_model, "seeds": 2})
  with pytest.raises(ConfigError, match="--lm_format=prose:3"):
    evaluate_run.evaluate_run(config, None, workdir, {
        "lm_knowledge": True, "model": tiny_model, "lm_format": "prose:3"})
  with pytest.raises(ConfigError, match="cannot score"):
    evaluate_run.evaluate_run(config, None, workdir, {
        "lm_knowledge": True, "backend": "gemini"})


@pytest.mark.slow  # the demo answer run, then one pass of the loop
def test_agents_in_score_mode_pick_the_scorers_choice(head_run, tiny_model,
                                                      tmp_path):
  """--backend=jax with agents.answer_mode=score: every answer is the
  likeliest choice per character after the facts shown, every verdict
  P(" ACCEPT") against the threshold fitted on the validation slice's
  one-round pass, and the LLM gave all the answers."""
  from racer_jax.agents.critic import LocalCritic
  from racer_jax.lm import causal_lm, cloze, jax_scorer
  from racer_jax.lm.choice_scoring import ScoreRequest, choice_values
  from racer_jax.train import evaluate_run
  _, workdir = head_run
  run = tmp_path / "run"
  shutil.copytree(workdir, run, ignore=shutil.ignore_patterns("eval"))
  config = evaluate_run.load_run_config(run)
  figures = evaluate_run.evaluate_run(config, None, run, {
      "backend": "jax", "model": tiny_model, "seeds": 1,
      "llm_setting": ["answer_mode=score"]}, progress=False)
  assert figures["llm_answered_fraction"] == 1.0
  # the critic's threshold: Youden's J on the validation pass's P(ACCEPT)
  threshold = figures["score_critic_min_accept"]
  fitted = figures["score_critic_calibration"]
  (cal,) = [p for p in (run / "calibration").glob("*/validation.score.jsonl")]
  cal = [json.loads(x) for x in cal.read_text().splitlines()]
  cal = [r for r in cal if "rounds" in r]
  assert fitted["questions"] == len(cal) > 0
  p_accept = np.array([r["rounds"][0]["critic_confidence"] for r in cal])
  correct = np.array([r["correct"] for r in cal], bool)
  assert all(r["rounds"][0]["verdict"] == "ACCEPT" for r in cal)
  assert threshold == LocalCritic.calibrate(
      p_accept, np.zeros_like(p_accept), correct).min_confidence
  assert fitted["accepted_fraction"] == np.mean(p_accept >= threshold)
  folder = next((run / "eval").glob("dev.jax-*.score_acc_norm"))
  records = [json.loads(x) for x in
             (folder / "full.seed0.jsonl").read_text().splitlines()]
  scorer = jax_scorer.JaxChoiceScorer(causal_lm.load_causal_lm(tiny_model))
  verdicts = set()
  for r in records:
    for round_ in r["rounds"]:
      assert round_["prompt"].endswith(f"Question: {r['question']}\n"
                                       "Answer:")
      row = scorer.score_many([ScoreRequest(
          round_["prompt"], cloze.continuations(r["choices"]))])[0]
      assert round_["answer"] == int(np.argmax(choice_values(row,
                                                             "acc_norm")))
      np.testing.assert_allclose(json.loads(round_["raw"])["logprob"],
                                 [s.logprob for s in row], atol=1e-4)
      accept = round_["critic_confidence"]
      assert round_["verdict"] == ("ACCEPT" if accept >= threshold
                                   else "UNSURE")
      verdicts.add(round_["verdict"])
  assert verdicts <= {"ACCEPT", "UNSURE"}


@pytest.mark.slow  # the demo answer run, then the explorer's episodes
def test_the_explorer_runs_in_process_on_a_jax_model(head_run, tiny_model,
                                                     tmp_path):
  """GraphDancer's explorer with --backend=jax: every step is generated by
  the model inside this process (no server), parsed, and scored as
  GraphDancer's figures."""
  from racer_jax.eval import explorer_eval
  from racer_jax.llm import llm_backends
  config, workdir = head_run
  run = tmp_path / "run"
  shutil.copytree(workdir, run, ignore=shutil.ignore_patterns("eval"))
  agents = llm_backends.evaluation_agents(
      config, backend="jax", model=tiny_model,
      settings=["graph=explorer", "max_interactions=2",
                "max_output_tokens=12", "thinking_budget=0"])
  figures = explorer_eval.evaluate(config, None, run, agents=agents,
                                   max_questions=1, progress=False)
  assert figures["explorer_questions"] == 1
  assert figures["llm"]["llm_calls"] >= 1
  for key in ("valid_format_rate", "valid_call_rate", "calls_per_question",
              "unfinished_at_limit"):
    assert 0.0 <= figures[key] <= max(1.0, figures["calls_per_question"])
