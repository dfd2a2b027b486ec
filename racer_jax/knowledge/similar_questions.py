"""KEAR's training-data knowledge (``answer.similar_questions = k``).

KEAR (Xu et al., 2021) shows the answerer, beside the ConceptNet facts, the
training questions most like the one being asked, each with its gold
answer. Here the index is the labeled questions of ``answer.similar_split``
(the training split), each embedded as ``stem + ", ".join(choices)`` by
``answer.similar_encoder`` (MiniLM by default); a question is shown its
``k`` nearest index questions by cosine, never itself (same id), as
``"Similar question: <stem> Answer: <gold>."`` — the same text before every
choice's knowledge, in training and in evaluation alike.

On CommonsenseQA this mostly finds *sibling* questions: the data set was
built by writing three questions per (source concept, relation) group, one
per target concept, so a sibling's answer is usually one of the distractors
here. The gain it brings is that construction artifact as much as
knowledge; report it apart from the KG's (``launch/evaluate.py`` and the
README do).

The index vectors are cached in ``cache_path`` (``.npz`` with the ids, the
encoder name and the text checksum), written to a temporary file and
renamed, and rebuilt when any of these differ.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from racer_jax.data import datasets, qa, validation
from racer_jax.text import encoder_registry

PREFIX = "Similar question:"


def index_text(example) -> str:
  """What a question is embedded as: its stem and its choices."""
  return f"{example.stem} {', '.join(example.choices)}"


def shown_text(example) -> str:
  """How an index question is shown to the answerer."""
  return (f"{PREFIX} {example.stem} "
          f"Answer: {example.choices[example.answer_index]}.")


class SimilarQuestions:
  """Nearest labeled questions of an index split.

  Args:
    index: the index split's :class:`QAExample` list (unlabeled ones are
      left out).
    encoder: a :class:`TextEncoder` (texts -> unit float vectors).
    cache_path: where the index vectors are kept (None: not cached).
    log: progress messages.
  """

  def __init__(self, index: Sequence, encoder, cache_path=None,
               log: Callable[[str], None] = print):
    self.index = [e for e in index if e.answer_index is not None]
    self.encoder = encoder
    self.skipped_unlabeled = len(index) - len(self.index)
    self.vectors = self._index_vectors(cache_path, log)  # f32 [N, d]

  def _index_vectors(self, cache_path, log) -> np.ndarray:
    ids = np.array([e.id for e in self.index])
    texts = [index_text(e) for e in self.index]
    name = type(self.encoder).__name__
    digest = hashlib.sha1("\n".join(texts).encode()).hexdigest()
    if cache_path is not None and Path(cache_path).exists():
      with np.load(cache_path) as z:
        if (str(z["encoder"]) == name and str(z["digest"]) == digest and
            np.array_equal(z["ids"], ids)):
          return z["vectors"]
      log(f"{cache_path}: stale (other questions or encoder), rebuilt")
    log(f"similar questions: embedding {len(texts)} index questions")
    vectors = np.asarray(self.encoder.encode(texts), np.float32)
    if cache_path is not None:
      cache_path = Path(cache_path)
      cache_path.parent.mkdir(parents=True, exist_ok=True)
      tmp = cache_path.with_name(cache_path.name + ".tmp.npz")
      np.savez(tmp, ids=ids, vectors=vectors, encoder=name, digest=digest)
      os.replace(tmp, cache_path)
    return vectors

  def nearest(self, examples: Sequence, k: int) -> list[list[int]]:
    """Per question, the index positions of its ``k`` nearest index
    questions (best first; ties by index order), itself excluded."""
    if k <= 0 or not examples:
      return [[] for _ in examples]
    position = {e.id: i for i, e in enumerate(self.index)}
    # the index's own questions reuse their index vectors
    known = [position.get(e.id, -1) for e in examples]
    known = [i if i >= 0 and index_text(self.index[i]) == index_text(e)
             else -1 for i, e in zip(known, examples)]
    new = [q for q, i in enumerate(known) if i < 0]
    query = self.vectors[np.maximum(known, 0)].copy()
    if new:
      query[new] = np.asarray(self.encoder.encode(
          [index_text(examples[q]) for q in new]), np.float32)
    scores = query @ self.vectors.T  # [Q, N]
    out = []
    for q, e in enumerate(examples):
      row = scores[q]
      if e.id in position:
        row = row.copy()
        row[position[e.id]] = -np.inf
      top = np.argsort(-row, kind="stable")[:k]
      out.append([int(i) for i in top if np.isfinite(row[i])])
    return out

  def texts(self, examples: Sequence, k: int) -> list[str]:
    """Per question, the shown text of its ``k`` nearest index questions."""
    return [" ".join(shown_text(self.index[i]) for i in row)
            for row in self.nearest(examples, k)]

  def per_choice(self, examples: Sequence, k: int) -> list[list[str]]:
    """Per question, per choice: the same text (the extra-knowledge
    layout the answer model and the collaboration loop take)."""
    return [[t] * len(e.choices)
            for e, t in zip(examples, self.texts(examples, k))]


def from_config(config, data_dir, cache_path,
                log: Callable[[str], None] = print) -> SimilarQuestions:
  """The index of ``answer.similar_split`` embedded by
  ``answer.similar_encoder`` (``text.model_dir`` for MiniLM). When that is
  the training split, the run's validation slice is left out of the index:
  its labels may be shown to no training question."""
  a = config.answer
  split = a.similar_split
  path = datasets.split_path(config, split,
                             datasets.resolve_data_dir(data_dir))
  examples, _ = qa.load_jsonl(path, on_bad_line=config.data.on_bad_line)
  held = 0
  if split == config.train.split:
    keep, held_rows = validation.split_rows(config, len(examples))
    examples, held = [examples[i] for i in keep], len(held_rows)
  name = a.similar_encoder
  kwargs = ({"model_dir": config.text.model_dir}
            if config.text.model_dir and name == "minilm" else {})
  sim = SimilarQuestions(examples, encoder_registry.get_encoder(name, **kwargs),
                         cache_path, log)
  log(f"similar questions: index of {len(sim.index)} from {path}"
      + (f" ({sim.skipped_unlabeled} unlabeled left out)"
         if sim.skipped_unlabeled else "")
      + (f" ({held} validation questions left out)" if held else ""))
  return sim


def for_run(config, data_dir, cache_dir, log) -> SimilarQuestions:
  """:func:`from_config` with the index vectors cached in ``cache_dir``
  (an answer run's folder; None: not cached)."""
  cache = Path(cache_dir) / "similar_questions.npz" if cache_dir else None
  return from_config(config, data_dir, cache, log)
