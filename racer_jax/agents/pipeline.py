"""Answering new questions from a trained answer run.

:class:`Pipeline` loads the whole stack an answer run names
(:class:`~racer_jax.agents.stack.AgentStack`: its refiner run, that run's
walker and graph store, the memory the loop starts from), grounds a new
question and its choices, extracts the subgraph, and runs the
collaboration loop on it. The critic uses the thresholds fitted on the
answer run's validation slice for this very setup (:func:`stored_critic`);
when none is stored yet the caller fits them first
(:func:`racer_jax.eval.calibration.fit_critic`, as ``launch/answer.py``
does). Runs trained before validation slices get the plain 0.5 rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import jax

from racer_jax.agents.agent_loop import QuestionResult
from racer_jax.agents.critic import LocalCritic, critic_of, stored_calibration
from racer_jax.agents.stack import AgentStack
from racer_jax.data import qa, validation
from racer_jax.data.bucketed import BucketedDataset
from racer_jax.kg import grounding, subgraph
from racer_jax.runs.workspace import SplitData
from racer_jax.runs import run_config


def stored_critic(stack: AgentStack) -> tuple[LocalCritic | None, str]:
  """``(critic, where its thresholds came from)``: the validation fit
  stored for ``stack``'s setup, ``None`` when it is not fitted yet, or the
  0.5 rule for a run without a validation slice."""
  found = validation.slice_of(stack.config)
  if found is None or found[0] <= 0:
    return LocalCritic(0.5, 0.0), ("default 0.5 rule (this run keeps no "
                                   "validation slice to calibrate on)")
  record = stored_calibration(stack.workdir, stack.calibration_identity())
  if record is None:
    return None, "not calibrated yet"
  return critic_of(record), (
      f"validation slice ({record['figures']['questions']} training "
      f"questions): {stack.workdir}/calibration")


class Pipeline:
  def __init__(self, workdir, data_dir=None, *, agents=None, api_key=None,
               ensemble: Sequence[str] = (), dry_run: bool = False,
               log: Callable[[str], None] = print):
    """``ensemble``: more answer runs shown this run's triples and paths
    (each with its own extra text), averaged with it by the AnswerAgent."""
    self.workdir = Path(workdir)
    config = run_config.load(self.workdir, "answer run")
    self.stack = AgentStack(config, data_dir, workdir, agents=agents,
                            ensemble=ensemble, api_key=api_key,
                            dry_run=dry_run,
                            progress=False, log=log)
    self.config, self.rconfig = config, self.stack.rconfig
    self.ws, self.graph, self.usage = (self.stack.ws, self.stack.graph,
                                       self.stack.usage)
    rconfig = self.rconfig
    self._grounder = grounding.Grounder(
        self.ws.kg.concepts,
        max_concept_tokens=rconfig.grounding.max_concept_tokens,
        max_candidates_per_span=rconfig.grounding.max_candidates_per_span)
    self._extractor = subgraph.SubgraphExtractor(
        self.ws.kg, **rconfig.subgraph.to_dict())
    self.critic, self.critic_source = stored_critic(self.stack)

  def use_calibration(self, record: dict) -> None:
    """Judges with the thresholds of a calibration record
    (:func:`racer_jax.eval.calibration.fit_critic`)."""
    self.critic = critic_of(record)
    self.critic_source = (f"validation slice ({record['figures']['questions']}"
                          f" training questions): {record.get('file')}")

  def answer(self, question: str, choices: Sequence[str],
             seed: int = 0) -> QuestionResult:
    if self.critic is None:
      raise ValueError(f"{self.workdir}: the critic is not calibrated for "
                       "this setup yet: fit it on the validation slice first "
                       "(racer_jax.eval.calibration.fit_critic)")
    choices = [c.strip() for c in choices if c.strip()]
    num_choices = self.rconfig.batch.num_choices
    if not 2 <= len(choices) <= num_choices:
      raise ValueError(f"give 2 to {num_choices} choices, got "
                       f"{len(choices)}")
    g = self._grounder.ground(question, choices)
    sg = self._extractor.extract(g.question_concepts, g.choice_concepts)
    dataset = BucketedDataset(
        [sg], [None], self.stack.encoder.encode([question]),
        buckets=[tuple(b) for b in self.rconfig.batch.buckets],
        num_choices=num_choices,
        max_degree=self.rconfig.subgraph.max_degree)
    batch = next(dataset.ordered_batches(1))
    example = qa.QAExample("question", question, tuple(choices), None)
    data = SplitData([example], [sg], dataset)
    collab = self.stack.collaboration(data, self.critic,
                                      self.stack.agents.max_turns)
    try:
      return collab.run_batch(batch, [example], jax.random.PRNGKey(seed))[0]
    finally:
      self.stack.forget(data)
