"""The zero-shot cloze format small models are evaluated in (lighteval's
CommonsenseQA / OpenBookQA tasks, the SmolLM2 cards): each choice text is
scored as the continuation of the question, optionally after a block of
knowledge."""

from __future__ import annotations

from typing import Sequence

from racer_jax.lm.choice_scoring import ScoreRequest


def question_context(stem: str, knowledge: str = "") -> str:
  """``Question: {stem}\\nAnswer:``, after ``knowledge`` and a blank line
  when there is any."""
  head = f"{knowledge.strip()}\n\n" if knowledge.strip() else ""
  return f"{head}Question: {stem.strip()}\nAnswer:"


def continuations(choices: Sequence[str]) -> tuple[str, ...]:
  """Each choice as it continues ``Answer:`` (one leading space)."""
  return tuple(" " + c.strip() for c in choices)


def cloze_request(stem: str, choices: Sequence[str],
                  knowledge: str = "") -> ScoreRequest:
  return ScoreRequest(question_context(stem, knowledge),
                      continuations(choices))
