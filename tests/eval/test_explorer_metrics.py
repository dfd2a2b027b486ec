"""GraphDancer's figures of the explorer, from per-question records."""

import pytest

from racer_jax.eval import qa_metrics


def _record(gold, episode, concepts=(("dog",), ("cat",))):
  return {"gold": gold, "choices": ["dog", "cat"], "prediction": 0,
          "correct": gold == 0, "accepted": True, "deciding_turn": 0,
          "rounds": [{"paths": [[], []]}],
          "seconds": 0.1, "answered_by": "local",
          "choice_concepts": [list(c) for c in concepts],
          "explorer": [episode]}


def _episode(steps, valid, calls, valid_calls, outcome, answer, choice,
             concepts):
  return {"steps": steps, "valid_steps": valid, "calls": calls,
          "valid_calls": valid_calls, "outcome": outcome, "answer": answer,
          "answer_choice": choice, "evidence_concepts": concepts}


def test_explorer_figures_by_hand():
  records = [
      # every step well formed, 2 calls, answers the gold "dog", saw "dog"
      _record(0, _episode(3, 3, 2, 2, "other_wrong", "dog", 0, ["dog"])),
      # one malformed step (answered with an error, the episode went on):
      # the question does not count as valid format; 3 calls, 1 failed
      _record(1, _episode(4, 3, 3, 2, "other_wrong", "the dog", 0,
                          ["cat", "pet"])),
      # ran to the interaction limit without an answer
      _record(0, _episode(8, 8, 8, 8, "unfinished", None, None, ["tree"])),
  ]
  f = qa_metrics.question_metrics(records)
  assert f["explorer_questions"] == 3
  assert f["valid_format_rate"] == pytest.approx(2 / 3)   # per question
  assert f["valid_step_rate"] == pytest.approx(14 / 15)   # per step
  assert f["valid_call_rate"] == pytest.approx(12 / 13)   # per call
  assert f["calls_per_question"] == pytest.approx(13 / 3)
  assert f["unfinished_at_limit"] == pytest.approx(1 / 3)
  assert f["evidence_hit_rate"] == pytest.approx(2 / 3)
  assert f["explorer_accuracy"] == pytest.approx(1 / 3)
  assert f["explorer_exact_match"] == pytest.approx(1 / 3)
  # ROUGE-L: "dog" vs "dog" 1; "the dog" vs "cat" 0; "" vs "dog" 0
  assert f["explorer_rouge_l"] == pytest.approx(1 / 3)


def test_no_explorer_no_figures():
  record = _record(0, None)
  record.pop("explorer")
  assert "valid_format_rate" not in qa_metrics.question_metrics([record])
