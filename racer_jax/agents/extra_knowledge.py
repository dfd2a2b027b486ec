"""The text an answer run was shown before the graph's triples, rebuilt for
the agents' loop: similar training questions (``answer.similar_questions``,
KEAR), then the open book's facts (``use_openbook``) — the order
:func:`racer_jax.answer.stage.knowledge_for` trained it with.

Built once per answer run (the book grounded, the similar-question index
loaded from the run's cache) and asked per batch of questions; the loop
puts the graph's triples and paths after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from racer_jax.knowledge import openbook, similar_questions


class ExtraKnowledge:
  """``texts(examples, subgraphs)``: per question, per choice, the extra
  text of the answer run ``config`` (its similar-question index cached in
  ``workdir``); ``ws`` and ``encoder`` are the retrieval run's, whose
  subgraphs ground the book's facts."""

  def __init__(self, config, data_dir, workdir, ws, encoder,
               log: Callable[[str], None] = print):
    self.book = self.similar = None
    self.facts_per_choice = config.openbook.facts_per_choice
    self.similar_questions = int(config.answer.similar_questions)
    if config.use_openbook:
      self.book = openbook.make_openbook(config, data_dir, ws, encoder)
    if self.similar_questions > 0:
      self.similar = similar_questions.for_run(config, data_dir,
                                              Path(workdir), log)

  def texts(self, examples, subgraphs) -> list[list[str]] | None:
    """[Q][C] text, or None when the run was shown no extra text."""
    facts = None
    if self.book is not None:
      facts = self.book.split_texts(examples, subgraphs,
                                    self.facts_per_choice)
    if self.similar is not None:
      facts = openbook.join_knowledge(self.similar.per_choice(
          examples, self.similar_questions), facts)
    return facts


def per_view(answerer, config, data_dir, workdir, ws, encoder,
             log: Callable[[str], None] = print) -> list[ExtraKnowledge]:
  """One :class:`ExtraKnowledge` per view of ``answerer``: an
  :class:`~racer_jax.agents.answer_agent.EnsembleAnswerer` 's ``views`` (members
  trained with different extra text), else the answer run ``config`` in
  ``workdir`` alone."""
  views = getattr(answerer, "views", None)
  runs = ([(m.config, m.workdir) for m in views] if views
          else [(config, workdir)])
  return [ExtraKnowledge(c, data_dir, w, ws, encoder, log) for c, w in runs]
