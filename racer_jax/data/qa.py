"""Multiple-choice QA examples and their jsonl loaders.

Formats read (detected per line):

* CommonsenseQA / OpenBookQA original: ``{"id", "question": {"stem",
  "choices": [{"label", "text"}, ...]}, "answerKey"}`` (``answerKey`` absent in
  test files);
* OpenBookQA HF-style (``Additional/*_hf.jsonl``): ``{"id", "question_stem",
  "choices": {"text": [...], "label": [...]}, "answerKey", "fact1", ...}``.

A malformed line raises :class:`~racer_jax.errors.DataError` naming file, line
and field, or with ``on_bad_line="skip"`` is skipped and counted in the
:class:`LoadReport`. Malformed too, the same way ``launch/answer.py`` checks
its choices: a repeated question id (it would be trained on or scored
twice), an empty choice label or text, fewer than two choices (one choice is
always "right"), a stem longer than :data:`MAX_STEM_CHARS` or a choice
longer than :data:`MAX_CHOICE_CHARS` (no question of these sets comes near),
and a file without a single question. Two choices that are the same but for
case or spaces (``oven`` and ``Oven ``) are kept — CommonsenseQA and
OpenBookQA have such questions — but counted and named in the report's
``warnings`` (``launch/answer.py`` refuses them outright).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import string
from typing import Any

import numpy as np

from racer_jax.errors import DataError

# Far above any CommonsenseQA / OpenBookQA question (stems < 600
# characters, choices < 100): a longer one is a pasted document, not a
# question.
MAX_STEM_CHARS = 4000
MAX_CHOICE_CHARS = 500


@dataclasses.dataclass(frozen=True)
class QAExample:
  """One multiple-choice question.

  Attributes:
    id: dataset id (unique within a split; duplicates are counted).
    stem: question text.
    choices: choice texts, in label order.
    answer_index: index of the gold choice, or None when unlabeled.
    meta: extras kept from the source (``labels``, ``question_concept``,
      ``fact1``, ``source`` = "file:line").
  """
  id: str
  stem: str
  choices: tuple[str, ...]
  answer_index: int | None
  meta: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)


@dataclasses.dataclass
class Grounded:
  """A question with its grounded concepts (global concept ids)."""
  example: QAExample
  question_concepts: np.ndarray
  choice_concepts: list[np.ndarray]
  flags: list[str]


@dataclasses.dataclass
class LoadReport:
  files: list[str] = dataclasses.field(default_factory=list)
  lines: int = 0
  loaded: int = 0
  skipped: int = 0
  blank: int = 0
  unlabeled: int = 0
  duplicate_ids: int = 0
  duplicate_choices: int = 0   # questions with a choice given twice
  warnings: list[str] = dataclasses.field(default_factory=list)
  formats: collections.Counter = dataclasses.field(
      default_factory=collections.Counter)
  bad_lines: list[str] = dataclasses.field(default_factory=list)

  def to_dict(self) -> dict:
    out = dataclasses.asdict(self)
    out["formats"] = dict(self.formats)
    out["bad_lines"] = self.bad_lines[:20]
    out["warnings"] = self.warnings[:20]
    return out


def _field(record: dict, key: str, kind, path, lineno, name=None):
  if not isinstance(record, dict) or key not in record:
    raise DataError(path, lineno, name or key, "missing")
  value = record[key]
  if not isinstance(value, kind):
    raise DataError(path, lineno, name or key,
                    f"expected {getattr(kind, '__name__', kind)}, got "
                    f"{type(value).__name__}")
  return value


def parse_record(record: Any, path, lineno: int) -> tuple[QAExample, str]:
  """Parses one decoded JSON record into a :class:`QAExample`.

  Returns the example and the detected format name.
  """
  if not isinstance(record, dict):
    raise DataError(path, lineno, None, "a line must hold a JSON object")
  qid = record.get("id")
  if not isinstance(qid, (str, int)) or isinstance(qid, bool) or qid == "":
    raise DataError(path, lineno, "id", "missing or not a string")
  meta: dict[str, Any] = {"source": f"{os.fspath(path)}:{lineno}"}
  if "question" in record:
    fmt = "original"
    q = _field(record, "question", dict, path, lineno)
    stem = _field(q, "stem", str, path, lineno, "question.stem")
    raw = _field(q, "choices", list, path, lineno, "question.choices")
    labels, texts = [], []
    for i, c in enumerate(raw):
      name = f"question.choices[{i}]"
      labels.append(str(_field(c, "label", (str, int), path, lineno,
                               name + ".label")))
      texts.append(_field(c, "text", str, path, lineno, name + ".text"))
    if isinstance(q.get("question_concept"), str):
      meta["question_concept"] = q["question_concept"]
  elif "question_stem" in record:
    fmt = "hf"
    stem = _field(record, "question_stem", str, path, lineno)
    ch = _field(record, "choices", dict, path, lineno)
    texts = _field(ch, "text", list, path, lineno, "choices.text")
    labels = _field(ch, "label", list, path, lineno, "choices.label")
    if len(texts) != len(labels):
      raise DataError(path, lineno, "choices", f"{len(texts)} texts but "
                      f"{len(labels)} labels")
    for i, (t, l) in enumerate(zip(texts, labels)):
      if not isinstance(t, str):
        raise DataError(path, lineno, f"choices.text[{i}]", "not a string")
      if not isinstance(l, (str, int)):
        raise DataError(path, lineno, f"choices.label[{i}]", "not a string")
    labels = [str(l) for l in labels]
    for key in ("fact1", "humanScore", "clarity"):
      if key in record:
        meta[key] = record[key]
  else:
    raise DataError(path, lineno, "question",
                    "neither 'question' (original) nor 'question_stem' (HF)")
  if len(set(labels)) != len(labels):
    raise DataError(path, lineno, "choices", f"duplicate labels {labels}")
  for i, label in enumerate(labels):
    if not label.strip():
      raise DataError(path, lineno, f"choices[{i}].label", "empty")
  _check_question(stem, texts, path, lineno)
  repeated = repeated_choices(texts)
  if repeated:
    meta["repeated_choices"] = repeated
  answer_index = None
  key = record.get("answerKey")
  if key not in (None, ""):
    if str(key) not in labels:
      raise DataError(path, lineno, "answerKey",
                      f"{key!r} is not one of the labels {labels}")
    answer_index = labels.index(str(key))
  meta["labels"] = labels
  return QAExample(id=str(qid), stem=stem, choices=tuple(texts),
                   answer_index=answer_index, meta=meta), fmt


def _check_question(stem: str, texts: list[str], path, lineno: int) -> None:
  """The checks every multiple-choice question passes (module docstring)."""
  if not stem.strip():
    raise DataError(path, lineno, "stem", "empty")
  if len(stem) > MAX_STEM_CHARS:
    raise DataError(path, lineno, "stem", f"{len(stem):,} characters (more "
                    f"than {MAX_STEM_CHARS:,}): not a question")
  if len(texts) < 2:
    raise DataError(path, lineno, "choices", f"{len(texts)} choice(s): a "
                    "multiple-choice question needs at least two")
  for i, text in enumerate(texts):
    if not text.strip():
      raise DataError(path, lineno, f"choices[{i}].text", "empty")
    if len(text) > MAX_CHOICE_CHARS:
      raise DataError(path, lineno, f"choices[{i}].text", f"{len(text):,} "
                      f"characters (more than {MAX_CHOICE_CHARS})")


def repeated_choices(texts) -> list[tuple[int, int]]:
  """``(first, again)`` index pairs of choices that are the same but for
  case and spaces."""
  seen: dict[str, int] = {}
  out = []
  for i, text in enumerate(texts):
    same = " ".join(text.split()).casefold()
    if same in seen:
      out.append((seen[same], i))
    else:
      seen[same] = i
  return out


def load_jsonl(paths, *, on_bad_line: str = "error",
               report: LoadReport | None = None
               ) -> tuple[list[QAExample], LoadReport]:
  """Loads QA examples from one or more jsonl files (either format)."""
  if on_bad_line not in ("error", "skip"):
    raise ValueError(f"on_bad_line must be 'error' or 'skip', got "
                     f"{on_bad_line!r}")
  report = report or LoadReport()
  examples: list[QAExample] = []
  seen: dict[str, str] = {}  # id -> where it was first read
  for path in ([paths] if isinstance(paths, (str, os.PathLike)) else paths):
    report.files.append(os.fspath(path))
    loaded_before = report.loaded
    with open(path, "rb") as f:
      for lineno, raw in enumerate(f, 1):
        report.lines += 1
        if not raw.strip():
          report.blank += 1
          continue
        try:
          try:
            # without its newline, a cut line's error is placed where the
            # line ends, not at "line 2 column 1"
            record = json.loads(raw.decode("utf-8").rstrip("\r\n"))
          except UnicodeDecodeError as e:
            raise DataError(path, lineno, None, "not valid UTF-8") from e
          except json.JSONDecodeError as e:
            raise DataError(path, lineno, None,
                            f"invalid JSON: {e.msg} at column {e.colno}") from e
          example, fmt = parse_record(record, path, lineno)
          if example.id in seen:
            raise DataError(path, lineno, "id", f"{example.id!r} repeats the "
                            f"question of {seen[example.id]}")
        except DataError as e:
          if on_bad_line == "error":
            raise
          report.duplicate_ids += e.field == "id" and "repeats" in e.reason
          report.skipped += 1
          report.bad_lines.append(str(e))
          continue
        seen[example.id] = f"{os.fspath(path)}:{lineno}"
        if example.meta.get("repeated_choices"):
          report.duplicate_choices += 1
          report.warnings.append(
              f"{os.fspath(path)}:{lineno}: question {example.id!r} gives a "
              "choice twice: " + ", ".join(
                  f"{example.choices[a]!r} (choice {a}) = "
                  f"{example.choices[b]!r} (choice {b})"
                  for a, b in example.meta["repeated_choices"]))
        report.formats[fmt] += 1
        report.unlabeled += example.answer_index is None
        report.loaded += 1
        examples.append(example)
    if report.loaded == loaded_before:
      raise DataError(path, None, None, "holds no questions" + (
          f" ({report.skipped} bad lines skipped)" if report.skipped else ""))
  return examples, report


# -- free-text answers (SQuAD v1.1's normalization) ---------------------------

def normalize_answer(text: str) -> str:
  """SQuAD v1.1 normalization."""
  text = text.lower()
  text = "".join(ch for ch in text if ch not in set(string.punctuation))
  text = re.sub(r"\b(a|an|the)\b", " ", text)
  return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
  return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
  """SQuAD token F1 (bag of normalized tokens)."""
  p, g = normalize_answer(prediction).split(), normalize_answer(gold).split()
  if not p or not g:
    return float(p == g)
  common = collections.Counter(p) & collections.Counter(g)
  same = sum(common.values())
  if same == 0:
    return 0.0
  precision, recall = same / len(p), same / len(g)
  return 2 * precision * recall / (precision + recall)


_ROUGE = None


def rouge_l(prediction: str, gold: str) -> float:
  """ROUGE-L F-measure (``rouge_score.rouge_scorer``, Porter stemming)."""
  global _ROUGE
  if _ROUGE is None:
    from rouge_score import rouge_scorer
    _ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
  return float(_ROUGE.score(gold, prediction)["rougeL"].fmeasure)
