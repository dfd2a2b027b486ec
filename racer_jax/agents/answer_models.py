"""The predictors of the registered answer models
(:data:`racer_jax.runs.registry.ANSWER_MODELS`): each restores an answer
run's newest checkpoint and gives choice probabilities for
:class:`racer_jax.agents.answer_agent.AnswerRequest` s. Their trainers are
in :mod:`racer_jax.train` (``answer_stage``, ``answer_head_stage``)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from racer_jax.answer import choice_head_step, cross_encoder_step
from racer_jax.answer import cross_encoder as ce
from racer_jax.runs.checkpoints import restore_run, restore_template
from racer_jax.text.minilm import MiniLMEncoder


class CrossEncoderPredictor:
  """The fine-tuned cross-encoder over ``question ⊕ choice ⊕ knowledge``,
  batched on the device."""

  batch_size = 32

  def __init__(self, config, workdir: Path,
               log: Callable[[str], None] = print):
    self.tokenizer = ce.ChoiceTokenizer(config.text.model_dir or None,
                                        max_length=config.answer.max_length)
    self.model, _, template = restore_template(
        cross_encoder_step.create_state, config, self.tokenizer, 1)
    self.state, _, self.step = restore_run(workdir, template, "answer",
                                           log=log)
    self.num_choices = config.batch.num_choices

  def probs(self, requests) -> np.ndarray:
    """float32 [Q, num_choices]."""
    tokens = [self.tokenizer.encode(r.question, r.choices, r.knowledge)
              for r in requests]
    data = cross_encoder_step.AnswerData(
        examples=requests, tokens=tokens,
        gold=-np.ones(len(requests), np.int32),
        num_choices=self.num_choices, knowledge=None)
    return cross_encoder_step.predict(self.model, self.state.params, data,
                                      self.tokenizer, self.batch_size)


class FrozenHeadPredictor:
  """The small head over frozen MiniLM vectors of question, choice and
  knowledge (with the walker's evidence and the paths' graph when the run
  read them)."""

  def __init__(self, config, workdir: Path,
               log: Callable[[str], None] = print):
    self.encoder = MiniLMEncoder(config.text.model_dir or None)
    self.model, _, template = restore_template(
        choice_head_step.create_state, config, self.encoder.dim, 1)
    self.state, _, self.step = restore_run(workdir, template, "answer",
                                           log=log)
    a = config.answer
    self.num_choices = config.batch.num_choices
    self._reads = (bool(a.evidence_workdir), bool(a.evidence_choice_head),
                   bool(a.graph_workdir))

  def probs(self, requests) -> np.ndarray:
    """float32 [Q, num_choices]."""
    uses_evidence, evidence_choice_head, uses_graph = self._reads
    return choice_head_step.head_probs(
        self.model, self.state.params, self.encoder, requests,
        self.num_choices, uses_evidence, evidence_choice_head, uses_graph)
