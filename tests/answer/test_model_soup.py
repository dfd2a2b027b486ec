"""Model soups of answer runs: the soup's weights are the ingredients'
exact mean, the soup folder is an answer run the evaluation restores, a
soup of one run with itself predicts what the run predicts, and
ingredients that are not one model shown one input are refused."""

import json
import shutil

import jax
import ml_collections
import jax.numpy as jnp
import numpy as np
import pytest

from configs import test as test_config
from racer_jax.agents.answer_agent import LocalAnswerer
from racer_jax.answer import evaluation as answer_eval
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.answer import soup as model_soup
from racer_jax.runs import run_config
from tests.trained_runs import QUIET


def _config(**answer):
  config = test_config.get_config()
  config.train.stage = "answer"
  config.answer.update({"model": "cross_encoder", "knowledge_workdir": "ref",
                        "paths_per_choice": 2, "max_sentences": 6,
                        "reached_only": False, "choice_triples": 3,
                        "similar_questions": 0, "max_length": 96,
                        "head_hidden": 256, **answer})
  config.text.model_dir = ""
  config.use_openbook, config.openbook.facts_per_choice = False, 2
  config.batch.num_choices = 5
  return config


def test_ingredients_must_be_one_model_shown_one_input():
  model_soup.check_ingredients([_config(), _config(learning_rate=1e-4)],
                               ["a", "b"])  # training settings may differ
  with pytest.raises(ValueError, match="answer.choice_triples 3 vs 0"):
    model_soup.check_ingredients([_config(), _config(choice_triples=0)],
                                 ["a", "b"])
  with pytest.raises(ValueError, match="answer.max_length 96 vs 128"):
    model_soup.check_ingredients([_config(), _config(max_length=128)],
                                 ["a", "b"])
  with pytest.raises(ValueError, match="frozen_head"):
    model_soup.check_ingredients([_config(model="frozen_head")] * 2,
                                 ["a", "b"])
  # a run saved before a knowledge field existed loads with it off
  saved = json.loads(_config().to_json())
  del saved["answer"]["similar_questions"]
  assert "answer.similar_questions" in run_config.upgrade(saved)
  old = ml_collections.ConfigDict(saved)
  model_soup.check_ingredients([_config(choice_triples=3), old], ["a", "b"])
  with pytest.raises(ValueError, match="answer.similar_questions 1 vs 0"):
    model_soup.check_ingredients([_config(similar_questions=1), old],
                                 ["a", "b"])
  with pytest.raises(ValueError, match="at least two"):
    model_soup.check_ingredients([_config()], ["a"])


def test_average_params_is_the_elementwise_mean():
  a = {"w": jnp.array([1.0, 2.0]), "b": {"x": jnp.array([[3.0]],
                                                        jnp.bfloat16)}}
  b = {"w": jnp.array([3.0, -2.0]), "b": {"x": jnp.array([[5.0]],
                                                        jnp.bfloat16)}}
  c = {"w": jnp.array([2.0, 3.0]), "b": {"x": jnp.array([[1.0]],
                                                        jnp.bfloat16)}}
  soup = model_soup.average_params([a, b, c])
  np.testing.assert_array_equal(soup["w"], [2.0, 1.0])
  assert soup["b"]["x"].dtype == jnp.bfloat16
  np.testing.assert_array_equal(soup["b"]["x"].astype(np.float32), [[3.0]])
  with pytest.raises(ValueError, match="shape"):
    model_soup.average_params([a, {"w": jnp.zeros(3), "b": a["b"]}])


def _perturbed_copy(workdir, dest, seed):
  """A second answer run: ``workdir``'s config, its weights plus noise."""
  shutil.copytree(workdir, dest)
  shutil.rmtree(dest / "checkpoints")
  shutil.rmtree(dest / "eval", ignore_errors=True)
  run = LocalAnswerer(workdir)
  leaves, tree = jax.tree.flatten(run.state.params)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  noisy = [x + 0.01 * jax.random.normal(k, x.shape, x.dtype)
           for x, k in zip(leaves, keys)]
  ckpt = Checkpointer(dest / "checkpoints")
  ckpt.save(int(run.step), run.state.replace(
      params=jax.tree.unflatten(tree, noisy)), {})
  ckpt.close()
  return dest


@pytest.mark.slow  # trains a second answer run (20 s)
def test_soup_of_two_runs_is_an_answer_run(answer_run, tmp_path):
  config, workdir = answer_run
  other = _perturbed_copy(workdir, tmp_path / "other", seed=1)
  soup = model_soup.make_soup([workdir, other], tmp_path / "soup",
                              log=lambda _: None)
  assert soup["ingredients"] == [str(workdir.resolve()),
                                 str(other.resolve())]
  a, b = LocalAnswerer(workdir), LocalAnswerer(other)
  restored = LocalAnswerer(tmp_path / "soup")
  assert restored.step == 0
  jax.tree.map(lambda s, x, y: np.testing.assert_allclose(
      s, (np.asarray(x, np.float32) + np.asarray(y, np.float32)) / 2,
      rtol=1e-6, atol=1e-7), restored.state.params, a.state.params,
      b.state.params)
  # a fresh optimizer state: a fine-tune from the soup starts clean
  assert all(float(jnp.abs(x).max()) == 0 for x in
             jax.tree.leaves(restored.state.opt_state))
  assert json.loads((tmp_path / "soup" / "soup.json").read_text()) == soup
  # the recipe is the run's; what was chosen on validation (k') is not:
  # the soup is another model, chosen for anew
  theirs = run_config.load(workdir).to_dict()
  assert theirs.pop(run_config.CHOSEN)
  assert run_config.load(tmp_path / "soup").to_dict() == theirs
  with pytest.raises(FileExistsError, match="already holds a run"):
    model_soup.make_soup([workdir, other], tmp_path / "soup",
                         log=lambda _: None)


def test_soup_of_a_run_with_itself_predicts_as_the_run(answer_run,
                                                       tmp_path):
  config, workdir = answer_run
  model_soup.make_soup([workdir, workdir], tmp_path / "soup",
                       log=lambda _: None)
  alone = answer_eval.evaluate(config, None, workdir,
                               out_workdir=tmp_path / "alone", **QUIET)
  soup = answer_eval.evaluate(config, None, tmp_path / "soup", **QUIET)
  assert soup["accuracy"] == alone["accuracy"]
  rows = lambda p: [json.loads(x) for x in p.read_text().splitlines()]
  got = rows(tmp_path / "soup" / "eval" / "dev.answer_only" /
             "member0.answer.jsonl")
  want = rows(tmp_path / "alone" / "eval" / "dev.answer_only" /
              "member0.answer.jsonl")
  np.testing.assert_allclose([p for r in got for p in r["probs"]],
                             [p for r in want for p in r["probs"]],
                             atol=1e-6)
  assert [r["knowledge"] for r in got] == [r["knowledge"] for r in want]
