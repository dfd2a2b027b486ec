"""Multi-hop QA retrieval sets: a passage corpus and questions whose gold is
a set of passages (HyGRL's setting).

Three sources, one shape (:class:`MultiHopSet`):

* ``2wiki``: HippoRAG's 2WikiMultiHopQA retrieval set,
  ``multihop/2wiki/corpus.jsonl`` (``{title, text}``) and
  ``questions.jsonl`` (``{id, question, answer, question_type,
  evidence}``). The gold passages follow from the evidence triples: a
  passage is gold when its title is an evidence *subject* (2WikiMultiHopQA
  takes its supporting facts from the subjects' articles). A subject that is
  exactly a title makes the question *exact*; otherwise the rule
  :func:`subject_titles` applies (the title without a trailing
  ``(disambiguator)``, or before its first comma, equals the subject) and
  the question is reported apart. Subjects no rule matches are counted and
  left out of the gold. The triples are labels only, never inputs.
* ``hotpotqa``: ``multihop/hotpotqa_train_sample100.json`` with its corpus
  (title -> sentences); gold = the supporting facts' titles (exact).
* ``musique``: ``multihop/musique_train_sample100.json`` with its corpus
  (``[{title, text}]``, titles may repeat); gold = the supporting
  paragraphs, matched on title and text (exact).

A question's gold is a tuple of *groups* of passage indices: a group is
found when any of its passages is retrieved (one group per subject or
supporting paragraph). Questions are split into a fixed train part and a
dev part by a hash of their id (:func:`split_of`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from racer_jax.data import datasets
from racer_jax.errors import ConfigError, DataError

DATASETS = ("2wiki", "hotpotqa", "musique")
_DISAMBIGUATOR = re.compile(r"\s*\([^()]*\)$")


@dataclasses.dataclass(frozen=True)
class MultiHopQuestion:
  """One question.

  Attributes:
    gold: per gold item (subject / supporting paragraph), the passage
      indices that count for it; empty when the question has no labels.
    exact: every gold item matched a passage exactly.
    unmatched: gold items (subjects) that match no passage.
  """
  id: str
  question: str
  answer: str
  kind: str
  gold: tuple[tuple[int, ...], ...]
  exact: bool
  unmatched: int = 0


@dataclasses.dataclass(frozen=True)
class MultiHopSet:
  titles: tuple[str, ...]
  texts: tuple[str, ...]
  questions: tuple[MultiHopQuestion, ...]
  source: str                      # the question file it came from


def split_of(question_id: str, dev_fraction_sixteenths: int = 4) -> str:
  """``"dev"`` when the last hex digit of ``sha1(id)`` is below
  ``dev_fraction_sixteenths`` (4: a quarter of the questions), else
  ``"train"``; fixed for a given id."""
  digit = int(hashlib.sha1(question_id.encode()).hexdigest()[-1], 16)
  return "dev" if digit < dev_fraction_sixteenths else "train"


def base_title(title: str) -> str:
  """The title without a trailing ``(disambiguator)``."""
  return _DISAMBIGUATOR.sub("", title)


def subject_titles(titles) -> dict[str, tuple[int, ...]]:
  """name -> passage indices for the non-exact rule: a title's base
  (:func:`base_title`) and its part before the first comma."""
  out: dict[str, list[int]] = {}
  for i, t in enumerate(titles):
    for name in {base_title(t), t.split(",")[0].strip()} - {t}:
      if name:
        out.setdefault(name, []).append(i)
  return {k: tuple(v) for k, v in out.items()}


def _read_jsonl(path: Path, fields: tuple[str, ...]) -> list[dict]:
  rows = []
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        raise DataError(path, n, None, f"not JSON ({e.msg})") from None
      for field in fields:
        if not isinstance(row.get(field), str):
          raise DataError(path, n, field, "missing or not a string")
      rows.append(row)
  return rows


def _wiki_gold(evidence, title_index, rule, path, n):
  if not isinstance(evidence, list) or not all(
      isinstance(t, list) and len(t) == 3 for t in evidence):
    raise DataError(path, n, "evidence", "must be a list of [subject, "
                    "relation, object] triples")
  groups, exact, unmatched = [], True, 0
  for subject in dict.fromkeys(str(t[0]) for t in evidence):
    if subject in title_index:
      groups.append((title_index[subject],))
    elif subject in rule:
      groups.append(rule[subject])
      exact = False
    else:
      unmatched += 1
      exact = False
  return tuple(groups), exact, unmatched


def load_2wiki(data_dir, eval_file=None) -> MultiHopSet:
  """The corpus and the questions (``eval_file`` instead of
  ``questions.jsonl``: the same format; ``evidence`` optional)."""
  root = Path(data_dir) / "multihop" / "2wiki"
  corpus = _read_jsonl(root / "corpus.jsonl", ("title", "text"))
  titles = tuple(r["title"] for r in corpus)
  if len(set(titles)) != len(titles):
    raise DataError(root / "corpus.jsonl", None, "title",
                    "titles repeat")
  title_index = {t: i for i, t in enumerate(titles)}
  rule = subject_titles(titles)
  path = Path(eval_file) if eval_file else root / "questions.jsonl"
  questions = []
  for n, r in enumerate(_read_jsonl(path, ("id", "question")), 1):
    if "evidence" in r:
      gold, exact, unmatched = _wiki_gold(r["evidence"], title_index, rule,
                                          path, n)
    else:
      gold, exact, unmatched = (), False, 0
    questions.append(MultiHopQuestion(
        id=r["id"], question=r["question"], answer=str(r.get("answer", "")),
        kind=str(r.get("question_type", "")), gold=gold, exact=exact,
        unmatched=unmatched))
  return MultiHopSet(titles, tuple(r["text"] for r in corpus),
                     tuple(questions), str(path))


def _load_json(path: Path):
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise DataError(path, e.lineno, None, f"not JSON ({e.msg})") from None


def load_hotpotqa(data_dir, eval_file=None) -> MultiHopSet:
  root = Path(data_dir) / "multihop"
  corpus = _load_json(root / "hotpotqa_train_sample100_corpus.json")
  titles = tuple(corpus)
  texts = tuple("".join(corpus[t]) for t in titles)
  index = {t: i for i, t in enumerate(titles)}
  path = Path(eval_file) if eval_file else (
      root / "hotpotqa_train_sample100.json")
  questions = []
  for n, q in enumerate(_load_json(path), 1):
    facts = q.get("supporting_facts") or []
    groups = tuple((index[t],) for t in dict.fromkeys(f[0] for f in facts)
                   if t in index)
    missing = len(dict.fromkeys(f[0] for f in facts)) - len(groups)
    if "question" not in q or "_id" not in q:
      raise DataError(path, None, "_id/question",
                      f"question {n} lacks one")
    questions.append(MultiHopQuestion(
        id=q["_id"], question=q["question"], answer=str(q.get("answer", "")),
        kind=str(q.get("type", "")), gold=groups,
        exact=bool(groups) and not missing, unmatched=missing))
  return MultiHopSet(titles, texts, tuple(questions), str(path))


def load_musique(data_dir, eval_file=None) -> MultiHopSet:
  root = Path(data_dir) / "multihop"
  corpus = _load_json(root / "musique_train_sample100_corpus.json")
  titles = tuple(p["title"] for p in corpus)
  texts = tuple(p["text"] for p in corpus)
  index = {(t, x): i for i, (t, x) in enumerate(zip(titles, texts))}
  path = Path(eval_file) if eval_file else (
      root / "musique_train_sample100.json")
  questions = []
  for n, q in enumerate(_load_json(path), 1):
    if "question" not in q or "id" not in q:
      raise DataError(path, None, "id/question",
                      f"question {n} lacks one")
    support = [(p["title"], p["paragraph_text"])
               for p in q.get("paragraphs", ()) if p.get("is_supporting")]
    groups = tuple((index[s],) for s in dict.fromkeys(support) if s in index)
    missing = len(dict.fromkeys(support)) - len(groups)
    questions.append(MultiHopQuestion(
        id=q["id"], question=q["question"], answer=str(q.get("answer", "")),
        kind=q["id"].split("__")[0], gold=groups,
        exact=bool(groups) and not missing, unmatched=missing))
  return MultiHopSet(titles, texts, tuple(questions), str(path))


def load_multihop(dataset: str, data_dir, eval_file=None) -> MultiHopSet:
  """One of :data:`DATASETS`."""
  loaders = {"2wiki": load_2wiki, "hotpotqa": load_hotpotqa,
             "musique": load_musique}
  if dataset not in loaders:
    raise ValueError(f"multihop dataset {dataset!r}; expected one of "
                     f"{list(DATASETS)}")
  root = datasets.need_dir(datasets.resolve_data_dir(data_dir),
                           f"the {dataset} set")
  if eval_file and not Path(eval_file).is_file():
    raise ConfigError(f"--eval_file={eval_file}: no such file")
  return loaders[dataset](root, eval_file)
