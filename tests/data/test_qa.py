"""QA jsonl loaders: both formats, real files, bad lines named precisely."""

import json

import pytest

from racer_jax.data import qa
from racer_jax.errors import DataError

GOOD = {"answerKey": "B", "id": "q1", "question": {
    "question_concept": "dog", "stem": "What does a dog do?",
    "choices": [{"label": "A", "text": "fly"}, {"label": "B", "text": "bark"}]}}
HF = {"id": "h1", "question_stem": "The sun is", "choices": {
    "text": ["hot", "cold"], "label": ["A", "B"]}, "answerKey": "A",
      "fact1": "the sun is hot"}


def _write(tmp_path, lines):
  path = tmp_path / "q.jsonl"
  path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l)
                            for l in lines) + "\n")
  return path


def test_both_formats(tmp_path):
  examples, report = qa.load_jsonl(_write(tmp_path, [GOOD, HF]))
  assert [e.id for e in examples] == ["q1", "h1"]
  assert examples[0].choices == ("fly", "bark") and examples[0].answer_index == 1
  assert examples[0].meta["question_concept"] == "dog"
  assert examples[1].answer_index == 0 and examples[1].meta["fact1"]
  assert dict(report.formats) == {"original": 1, "hf": 1}


BAD = [
    ("{not json", None),
    ([1, 2], None),
    ({"question": GOOD["question"]}, "id"),
    ({"id": "x", "question": {"choices": []}}, "question.stem"),
    ({"id": "x", "question": {"stem": "s", "choices": [{"label": "A"}]}},
     "question.choices[0].text"),
    ({"id": "x", "answerKey": "Z", "question": GOOD["question"]}, "answerKey"),
    ({"id": "x", "question_stem": "s", "choices": {"text": ["a"],
                                                    "label": ["A", "B"]}},
     "choices"),
    ({"id": "x", "stem": "s"}, "question"),
    # issue 39: what answer.py refuses is refused in a file too
    ({"id": "x", "answerKey": "A", "question": {"stem": "s", "choices": [
        {"label": "A", "text": "yes"}]}}, "choices"),
    ({"id": "x", "answerKey": "A", "question": {"stem": "s",
                                                "choices": []}}, "choices"),
    ({"id": "x", "question": {"stem": "s", "choices": [
        {"label": "A", "text": "oven"}, {"label": "B", "text": " "}]}},
     "choices[1].text"),
    ({"id": "x", "question": {"stem": "w" * 94_000, "choices": GOOD[
        "question"]["choices"]}}, "stem"),
]


@pytest.mark.parametrize("bad,field", BAD)
def test_bad_line_names_file_line_field(tmp_path, bad, field):
  path = _write(tmp_path, [GOOD, bad, GOOD | {"id": "q2"}])
  with pytest.raises(DataError) as err:
    qa.load_jsonl(path)
  assert err.value.line == 2 and err.value.field == field
  assert str(path) in str(err.value) and ":2:" in str(err.value)
  examples, report = qa.load_jsonl(path, on_bad_line="skip")
  assert [e.id for e in examples] == ["q1", "q2"]
  assert report.skipped == 1 and len(report.bad_lines) == 1


def test_unlabeled_kept_and_counted(tmp_path):
  unlabeled = {"id": "u", "question": GOOD["question"]}
  examples, report = qa.load_jsonl(
      _write(tmp_path, [unlabeled, unlabeled | {"id": "v"}, ""]))
  assert examples[1].answer_index is None
  assert report.unlabeled == 2 and report.duplicate_ids == 0
  assert report.blank == 1 and report.loaded == 2


def test_a_cut_line_is_placed_where_it_ends(tmp_path):
  line = json.dumps(GOOD)[:44]
  with pytest.raises(DataError, match="at column 45"):
    qa.load_jsonl(_write(tmp_path, [GOOD, line]))


def test_a_choice_given_twice_is_kept_but_said(tmp_path):
  twice = {"id": "t", "question": {"stem": "s", "choices": [
      {"label": "A", "text": "oven"}, {"label": "B", "text": "freezer"},
      {"label": "C", "text": "Oven "}]}}
  examples, report = qa.load_jsonl(_write(tmp_path, [GOOD, twice]))
  assert examples[1].meta["repeated_choices"] == [(0, 2)]
  assert report.duplicate_choices == 1
  assert "q.jsonl:2: question 't' gives a choice twice: 'oven' (choice 0) " \
      "= 'Oven ' (choice 2)" in report.to_dict()["warnings"][0]


def test_no_choices_is_not_a_bad_answer_key(tmp_path):
  bad = {"id": "x", "answerKey": "A", "question": {"stem": "s",
                                                   "choices": []}}
  with pytest.raises(DataError, match="0 choice") as err:
    qa.load_jsonl(_write(tmp_path, [bad]))
  assert err.value.field == "choices"


def test_repeated_id_empty_label_and_empty_file_are_refused(tmp_path):
  path = _write(tmp_path, [GOOD, GOOD])
  with pytest.raises(DataError, match=r"repeats the question of .*:1") as err:
    qa.load_jsonl(path)
  assert err.value.line == 2 and err.value.field == "id"
  examples, report = qa.load_jsonl(path, on_bad_line="skip")
  assert len(examples) == 1 and report.duplicate_ids == report.skipped == 1
  unlabeled_choice = json.loads(json.dumps(GOOD))
  unlabeled_choice["question"]["choices"][1]["label"] = " "
  with pytest.raises(DataError, match="empty") as err:
    qa.load_jsonl(_write(tmp_path, [unlabeled_choice]))
  assert err.value.field == "choices[1].label"
  empty = tmp_path / "empty.jsonl"
  empty.write_text("\n")
  with pytest.raises(DataError, match="holds no questions"):
    qa.load_jsonl(empty)


def test_bad_utf8(tmp_path):
  path = tmp_path / "q.jsonl"
  path.write_bytes(json.dumps(GOOD).encode() + b"\n\xff\xfe\n")
  with pytest.raises(DataError, match="UTF-8"):
    qa.load_jsonl(path)


@pytest.mark.data
@pytest.mark.parametrize("rel,count,labeled", [
    ("csqa/train_rand_split.jsonl", 9741, True),
    ("csqa/dev_rand_split.shared.jsonl", 834, True),
    ("csqa/test_rand_split_no_answers.jsonl", 1140, False),
    ("obqa/Main/train.jsonl", 4957, True),
    ("obqa/Main/dev.jsonl", 500, True),
    ("obqa/Additional/train_hf.jsonl", 4957, True),
    ("obqa/Additional/dev_hf.jsonl", 500, True),
])
def test_real_files_load_completely(data_dir, rel, count, labeled):
  examples, report = qa.load_jsonl(data_dir / rel)
  assert len(examples) == report.loaded == count
  assert report.skipped == 0 and report.duplicate_ids == 0
  n_choices = 5 if rel.startswith("csqa") else 4
  assert all(len(e.choices) == n_choices for e in examples)
  assert all((e.answer_index is not None) == labeled for e in examples)
