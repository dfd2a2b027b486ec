"""The AnswerAgent as an ensemble of answer runs inside the agents' loop:
its probabilities are the members' mean on the knowledge the loop showed,
members trained with other graph knowledge are refused, members trained
with other extra text each read their own view, and a resumed
evaluation never mixes answerers."""

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from configs import test as test_config
from racer_jax.agents.answer_agent import (
  AnswerRequest,
  EnsembleAnswerer,
  LocalAnswerer,
  knowledge_setup,
)
from racer_jax.eval import agents_eval
from tests.trained_runs import QUIET


def _member(name, probs, **answer):
  config = test_config.get_config()
  config.answer.update({"knowledge_workdir": "ref", "paths_per_choice": 2,
                        "max_sentences": 6, "reached_only": False,
                        "choice_triples": 0, "similar_questions": 0,
                        **answer})
  config.use_openbook, config.openbook.facts_per_choice = False, 2
  config.batch.num_choices = 3
  return SimpleNamespace(config=config, workdir=name, step=7,
                         num_choices=3, uses_knowledge=True,
                         probs=lambda requests: probs[:len(requests)])


def test_probabilities_are_the_members_mean():
  a = np.array([[0.6, 0.3, 0.1], [0.1, 0.1, 0.8]], np.float32)
  b = np.array([[0.0, 0.9, 0.1], [0.2, 0.4, 0.4]], np.float32)
  ensemble = EnsembleAnswerer([_member("a", a), _member("b", b)])
  requests = [AnswerRequest("q1", ["x", "y", "z"], ["k1", "k2", "k3"]),
              AnswerRequest("q2", ["x", "y"], ["", ""])]
  np.testing.assert_allclose(ensemble.probs(requests), (a + b) / 2)
  first, second = ensemble.answer_many(requests)
  # (0.3, 0.6, 0.1): the second member's favourite wins on the average.
  assert first.choice == 1 and first.confidence == pytest.approx(0.6)
  # A question with fewer choices than the model's width: only its own.
  assert len(second.probs) == 2 and second.choice == 1
  assert ensemble.step == [7, 7] and ensemble.workdirs == ["a", "b"]


def test_a_member_trained_with_other_knowledge_is_refused():
  p = np.ones((1, 3), np.float32) / 3
  with pytest.raises(ValueError, match=r"answer\.choice_triples 0 vs 3"):
    EnsembleAnswerer([_member("a", p), _member("b", p, choice_triples=3)])
  with pytest.raises(ValueError, match="knowledge_workdir"):
    EnsembleAnswerer([_member("a", p),
                      _member("b", p, knowledge_workdir="other")])
  with pytest.raises(ValueError, match="at least one"):
    EnsembleAnswerer([])
  # Seeds, epochs and learning rates are not part of the knowledge setup.
  assert knowledge_setup(_member("a", p).config) == knowledge_setup(
      _member("b", p, learning_rate=1e-4).config)


def test_members_with_other_extra_text_read_their_own_view():
  seen = {}

  def member(name, **answer):
    m = _member(name, None, **answer)
    m.probs = lambda reqs: (seen.__setitem__(name, [r.knowledge for r in
                                                    reqs]) or
                            np.full((len(reqs), 3), 1 / 3, np.float32))
    return m

  ensemble = EnsembleAnswerer([member("a"), member("b", similar_questions=1),
                               member("c"), member("d", similar_questions=1)])
  assert ensemble.member_view == [0, 1, 0, 1]
  assert [v.workdir for v in ensemble.views] == ["a", "b"]
  request = AnswerRequest("q", ["x", "y", "z"], ["k1", "k2", "k3"],
                          [["k1", "k2", "k3"], ["s k1", "s k2", "s k3"]])
  ensemble.probs([request])
  assert seen == {"a": [["k1", "k2", "k3"]], "c": [["k1", "k2", "k3"]],
                  "b": [["s k1", "s k2", "s k3"]],
                  "d": [["s k1", "s k2", "s k3"]]}
  with pytest.raises(ValueError, match="one knowledge text per view"):
    ensemble.probs([AnswerRequest("q", ["x"], ["k"])])
  # The graph knowledge must still agree, whatever the extra text.
  with pytest.raises(ValueError, match=r"answer\.paths_per_choice 2 vs 4"):
    EnsembleAnswerer([member("a"), member("b", similar_questions=1,
                                          paths_per_choice=4)])


@pytest.mark.slow  # ~1-2 min: two passes of the loop and a second model
def test_the_loop_answers_with_the_members_mean(answer_run, head_run,
                                                tmp_path):
  config, shared = answer_run
  _, other = head_run
  workdir = tmp_path / "run"  # other tests evaluate the shared run too
  shutil.copytree(shared, workdir, ignore=shutil.ignore_patterns("eval"))
  figures = agents_eval.evaluate(config, None, workdir, ensemble=[other],
                                 baseline_workdir=[other, workdir], **QUIET)
  out = workdir / "eval" / "dev.ensemble"
  assert figures["answer_members"] == [str(workdir.resolve()),
                                       str(other.resolve())]
  members = [LocalAnswerer(w) for w in (workdir, other)]
  rows = [json.loads(x) for x in
          (out / "full.seed0.jsonl").read_text().splitlines()]
  assert rows
  for r in rows:
    for turn in r["rounds"]:
      req = AnswerRequest(r["question"], r["choices"], turn["knowledge"])
      want = np.mean([m.probs([req])[0][:len(r["choices"])]
                      for m in members], axis=0)
      np.testing.assert_allclose(turn["probs"], want, atol=1e-4)
  assert figures["triples_verified_fraction"] == 1.0
  # Several baselines: their ensemble shown nothing.
  assert figures["answer_head_only_source"] == f"{other},{workdir}"
  blank = [AnswerRequest(r["question"], r["choices"], [""] * len(
      r["choices"])) for r in rows]
  right = [int(np.argmax(np.mean([m.probs([q])[0][:len(q.choices)]
                                  for m in members[::-1]], 0)) == r["gold"])
           for q, r in zip(blank, rows)]
  assert figures["accuracy_answer_head_only"] == pytest.approx(
      np.mean(right))
  # The single model's folder is untouched; resuming with other members
  # is refused rather than mixing the two answerers' passes.
  assert not (workdir / "eval" / "dev" / "full.seed0.jsonl").exists()
  with pytest.raises(ValueError, match="another ensemble .*rerun without "
                     "--resume"):
    agents_eval.evaluate(config, None, workdir, ensemble=[workdir],
                         resume=True, **QUIET)


def test_a_stored_calibration_serves_only_its_own_setup(tmp_path):
  from racer_jax.agents import critic as critic_lib
  setup = {"answer_members": [str(tmp_path / "run")], "memory_source": "x"}
  other = dict(setup, answer_members=setup["answer_members"] + ["other"])
  record = {"critic_calibration": "validation", "figures": {"questions": 3},
            "thresholds": {"min_confidence": 0.4, "min_support": 0.5}}
  path = critic_lib.write_calibration(tmp_path, setup, record)
  assert critic_lib.stored_calibration(tmp_path, other) is None
  found = critic_lib.stored_calibration(tmp_path, setup)
  critic = critic_lib.critic_of(found)
  assert (critic.min_confidence, critic.min_support) == (0.4, 0.5)
  # a file whose recorded setup differs (a hash collision, a hand edit)
  # is not trusted
  path.write_text(json.dumps({**record, "identity": other}))
  assert critic_lib.stored_calibration(tmp_path, setup) is None
