"""A new answer model added from this file alone: a trainer, a predictor and
one registry line (:data:`racer_jax.runs.registry.ANSWER_MODELS`), no
library module touched. The config checks, the answer stage (checkpointed,
resumed exactly, the critic calibrated through the agents' stack), the
AgentAnswerer, the answer-only evaluation and the model-soup and
walker-evidence refusals all take it."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.training import train_state

from racer_jax.agents.answer_agent import AnswerRequest, LocalAnswerer
from racer_jax.data import validation
from racer_jax.errors import ConfigError
from racer_jax.answer import evaluation as answer_eval
from racer_jax.runs import registry
from racer_jax.runs.checkpoints import Checkpointer, restore_run
from racer_jax.runs.config_checks import check_config
from racer_jax.runs.update_loop import run_stage_updates
from racer_jax.answer import inputs as answer_inputs
from racer_jax.answer import soup as model_soup
from racer_jax.answer import stage as answer_stage
from tests.trained_runs import QUIET

UPDATES = 40


def _fresh_state(config):
  return train_state.TrainState.create(
      apply_fn=None, params={"logits": jnp.zeros(config.batch.num_choices)},
      tx=optax.adam(0.1))


def train_position_prior(config, data_dir, workdir, *, progress, log,
                         stop_after):
  """A model a user might add as a baseline: a learned prior over the
  answer's position, fitted by cross-entropy on the training questions
  outside the validation slice."""
  examples = answer_inputs.load_examples(config, data_dir,
                                              config.train.split)
  rows, _ = validation.split_rows(config, len(examples))
  gold = jnp.asarray([examples[i].answer_index for i in rows])
  state = _fresh_state(config)
  ckpt = Checkpointer(workdir / "checkpoints", config.train.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state = restored[0]

  @jax.jit
  def update(state, step):
    def loss_of(params):
      return -jnp.mean(jax.nn.log_softmax(params["logits"])[gold])
    loss, grads = jax.value_and_grad(loss_of)(state.params)
    # the update loop stops at a non-finite step (metrics carry "finite")
    return state.apply_gradients(grads=grads), {
        "loss": loss, "finite": jnp.isfinite(loss).astype(jnp.float32)}

  _, last, finished = run_stage_updates(
      state, update, config=config, workdir=workdir, ckpt=ckpt,
      start=int(state.step), total=UPDATES, stop_after=stop_after,
      record=lambda done: {"stage": "answer"}, progress=progress,
      desc="position prior")
  return last, finished


class PositionPrior:
  """Its predictor: the prior over each request's own choices."""

  def __init__(self, config, workdir, log=print):
    self.state, _, self.step = restore_run(workdir, _fresh_state(config),
                                           "answer", log=log)

  def probs(self, requests):
    prior = np.asarray(jax.nn.softmax(self.state.params["logits"]))
    out = np.zeros((len(requests), prior.size), np.float32)
    for i, r in enumerate(requests):
      out[i, :len(r.choices)] = prior[:len(r.choices)]
      out[i] /= out[i].sum()
    return out


@pytest.fixture
def position_prior():
  registry.ANSWER_MODELS.register("position_prior", registry.AnswerModel(
      trainer=train_position_prior, predictor=PositionPrior))
  yield
  registry.ANSWER_MODELS.unregister("position_prior")


def _config(retrieval_runs):
  config, _, refiner_dir = retrieval_runs
  config = config.copy_and_resolve_references()
  config.train.stage = "answer"
  config.answer.model = "position_prior"
  config.answer.knowledge_workdir = str(refiner_dir)
  config.train.log_every = config.train.checkpoint_every = 10
  return config


def test_the_config_checks_take_its_name(position_prior, retrieval_runs):
  config = _config(retrieval_runs)
  check_config(config)
  config.answer.evidence_workdir = "ref"
  with pytest.raises(ConfigError, match=r"answer.model='position_prior' "
                     r"does not read the walker's evidence.*'frozen_head'"):
    check_config(config)
  config.answer.evidence_workdir = ""
  with pytest.raises(ValueError, match=r"'position_prior' runs share no "
                     r"pretrained weights.*'cross_encoder'"):
    model_soup.check_ingredients([config, config], ["a", "b"])
  registry.ANSWER_MODELS.unregister("position_prior")
  with pytest.raises(ConfigError, match=r"answer.model='position_prior': "
                     r"expected one of .*'frozen_head'"):
    check_config(config)


def test_the_answer_stage_trains_resumes_and_evaluates_it(
    position_prior, retrieval_runs, tmp_path):
  config = _config(retrieval_runs)
  whole, parts = tmp_path / "whole", tmp_path / "parts"
  last = answer_stage.train(config, None, whole, **QUIET)
  answer_stage.train(config, None, parts, stop_after=15, **QUIET)
  answer_stage.train(config, None, parts, **QUIET)   # resumes at 10
  local, resumed = LocalAnswerer(whole), LocalAnswerer(parts)
  assert local.step == resumed.step == UPDATES
  np.testing.assert_array_equal(local.state.params["logits"],
                                resumed.state.params["logits"])
  # it learned the training questions' most frequent answer position
  examples = answer_inputs.load_examples(config, None, "train")
  rows, _ = validation.split_rows(config, len(examples))
  counts = np.bincount([examples[i].answer_index for i in rows],
                       minlength=config.batch.num_choices)
  assert np.argmax(local.state.params["logits"]) == np.argmax(counts)
  [a] = local.answer_many([AnswerRequest("q", ["x", "y", "z"],
                                         ["", "", ""])])
  assert a.choice == np.argmax(counts[:3]) and a.backend == "local"
  # the critic was calibrated through the agents' stack on its answers
  assert set(last["critic_thresholds"]) == {"min_confidence", "min_support"}
  # the answer-only evaluation restores it through the registry
  figures = answer_eval.evaluate(config, None, whole, **QUIET)
  dev = answer_inputs.load_examples(config, None, config.eval.split)
  want = np.mean([e.answer_index == np.argmax(counts[:len(e.choices)])
                  for e in dev])
  assert figures["accuracy"] == pytest.approx(want)
