"""Grounding text to ConceptNet concepts by lemma n-gram matching.

The rules follow the usual KG-QA preprocessing (KagNet / MHGRN / QA-GNN),
with ``simplemma`` as the lemmatizer and the classic English stopword list of
the ``stopwords`` package:

* The matcher indexes every concept of at most ``max_concept_tokens`` tokens
  (concepts of 5+ tokens are skipped), except concepts whose first or last
  token is a pronoun and concepts made only of stopwords. Each concept is
  indexed under its surface tokens and under its tokens' lemmas.
* A text is tokenized (lowercase words, inner hyphens kept, possessive ``'s``
  dropped); every n-gram (n <= ``max_concept_tokens``) that is not all
  stopwords is looked up by surface and by lemma; of the concepts one span
  matches, the ``max_candidates_per_span`` shortest names are kept.
* An answer choice whose whole text is a concept grounds to it first.
* If nothing matched, fall back to single tokens whose lemma (or surface form)
  is a concept: first the non-stopword tokens, then any token.
* Question concepts are the stem's concepts minus every choice's concepts, so
  that a walk never starts on a target.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Sequence

import numpy as np
import simplemma
import stopwords as stopwords_lib

STOPWORDS: frozenset[str] = frozenset(
    w for w in stopwords_lib.get_stopwords("english") if w)
PRONOUNS: frozenset[str] = frozenset({
    "i", "me", "my", "mine", "myself", "you", "your", "yours", "yourself",
    "yourselves", "he", "him", "his", "himself", "she", "her", "hers",
    "herself", "it", "its", "itself", "we", "us", "our", "ours", "ourselves",
    "they", "them", "their", "theirs", "themselves", "someone", "somebody",
    "something", "anyone", "anybody", "anything", "everyone", "everybody",
    "everything", "one", "oneself", "this", "that", "these", "those", "who",
    "whom", "whose", "what", "which",
})
_TOKEN = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*")


@dataclasses.dataclass
class GroundedText:
  """Concept ids found in one question.

  Attributes:
    question_concepts: int64 [Q], sorted unique ids from the stem.
    choice_concepts: one sorted int64 array per choice.
    flags: why the question may be unanswerable (``"no_question_concept"``,
      ``"choice_without_concept:<i>"``, ``"no_choices"``), empty when fine.
  """
  question_concepts: np.ndarray
  choice_concepts: list[np.ndarray]
  flags: list[str]


class Grounder:
  """Maps text to concept ids of a concept vocabulary (``_``-joined names)."""

  def __init__(self, concepts: Sequence[str], *, max_concept_tokens: int = 4,
               max_candidates_per_span: int = 3, language: str = "en"):
    self.concepts = concepts
    self.max_tokens = max_concept_tokens
    self.max_candidates = max_candidates_per_span
    self.language = language
    self._lemmas: dict[str, str] = {}
    self._vocab = {c: i for i, c in enumerate(concepts)}
    self.index_report = collections.Counter()
    index: dict[str, list[int]] = collections.defaultdict(list)
    for cid, name in enumerate(concepts):
      toks = name.split("_")
      if len(toks) > max_concept_tokens:
        self.index_report["skipped_too_long"] += 1
        continue
      if toks[0] in PRONOUNS or toks[-1] in PRONOUNS:
        self.index_report["skipped_pronoun_edge"] += 1
        continue
      lemmas = [self.lemma(t) for t in toks]
      if all(t in STOPWORDS or l in STOPWORDS for t, l in zip(toks, lemmas)):
        self.index_report["skipped_all_stopwords"] += 1
        continue
      self.index_report["indexed"] += 1
      index[" ".join(toks)].append(cid)
      lemma_key = " ".join(lemmas)
      if lemma_key != " ".join(toks):
        index[lemma_key].append(cid)
    self._index = dict(index)

  # -- text ----------------------------------------------------------------
  def lemma(self, token: str) -> str:
    out = self._lemmas.get(token)
    if out is None:
      out = simplemma.lemmatize(token, lang=self.language).lower()
      self._lemmas[token] = out
    return out

  @staticmethod
  def tokenize(text: str) -> list[str]:
    toks = _TOKEN.findall(text.lower())
    return [t[:-2] if t.endswith("'s") else t for t in toks]

  # -- matching ------------------------------------------------------------
  def _shortest(self, ids: set[int]) -> list[int]:
    return sorted(ids, key=lambda i: (len(self.concepts[i]), i))[
        :self.max_candidates]

  def match(self, text: str) -> set[int]:
    """Concept ids matched by the n-grams of ``text`` (no fallback)."""
    toks = self.tokenize(text)
    lemmas = [self.lemma(t) for t in toks]
    found: set[int] = set()
    for n in range(1, self.max_tokens + 1):
      for i in range(len(toks) - n + 1):
        span, span_l = toks[i:i + n], lemmas[i:i + n]
        if all(t in STOPWORDS or l in STOPWORDS for t, l in zip(span, span_l)):
          continue
        ids = set(self._index.get(" ".join(span), ()))
        ids.update(self._index.get(" ".join(span_l), ()))
        if ids:
          found.update(self._shortest(ids))
    return found

  def hard_ground(self, text: str) -> set[int]:
    """Fallback: single tokens whose lemma or surface form is a concept."""
    toks = self.tokenize(text)
    for allow_stopwords in (False, True):
      found = set()
      for t in toks:
        if not allow_stopwords and t in STOPWORDS:
          continue
        for form in (self.lemma(t), t):
          if form in self._vocab:
            found.add(self._vocab[form])
            break
      if found:
        return found
    return set()

  def whole_phrase(self, text: str) -> set[int]:
    """The concept named by the whole text, by surface or lemma form."""
    toks = self.tokenize(text)
    if not toks:
      return set()
    found = set()
    for form in ("_".join(toks), "_".join(self.lemma(t) for t in toks)):
      if form in self._vocab:
        found.add(self._vocab[form])
    return found

  def ground_text(self, text: str, *, is_choice: bool = False) -> set[int]:
    found = self.whole_phrase(text) if is_choice else set()
    found |= self.match(text)
    return found or self.hard_ground(text)

  def ground(self, stem: str, choices: Sequence[str]) -> GroundedText:
    """Grounds a multiple-choice question (stem + choice texts)."""
    choice_sets = [self.ground_text(c, is_choice=True) for c in choices]
    all_choice = set().union(*choice_sets) if choice_sets else set()
    question = self.ground_text(stem) - all_choice
    flags = []
    if not choices:
      flags.append("no_choices")
    if not question:
      flags.append("no_question_concept")
    flags += [f"choice_without_concept:{i}"
              for i, s in enumerate(choice_sets) if not s]
    as_array = lambda s: np.array(sorted(s), dtype=np.int64)
    return GroundedText(question_concepts=as_array(question),
                        choice_concepts=[as_array(s) for s in choice_sets],
                        flags=flags)
