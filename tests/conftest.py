"""Shared fixtures: the real data directory, the demo KG, slow-test gating."""

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# One persistent JAX compilation cache for the test run, its xdist workers
# and the launchers the tests start (they inherit the environment): most of
# the suite's time is XLA compiling the same programs again in fixtures,
# tests and subprocesses. A size limit turns on JAX's file lock, so two
# workers never read an entry half written. Entries are keyed by the
# program, the backend's flags and JAX's version, so a stale one is never
# used; delete the folder to start cold.
_COMPILATION_CACHE = {
    "jax_compilation_cache_dir": str(REPO / ".cache" / "jax-tests"),
    "jax_compilation_cache_max_size": 4 << 30,
}
for _name, _value in _COMPILATION_CACHE.items():
  os.environ.setdefault(_name.upper(), str(_value))
if "jax" in sys.modules:  # imported before this file: set it directly
  import jax
  for _name in _COMPILATION_CACHE:
    jax.config.update(_name, type(_COMPILATION_CACHE[_name])(
        os.environ[_name.upper()]))

# The trained demo runs (walker, refiner, answer models) that tests in
# several folders share, each trained once per session.
pytest_plugins = ["tests.trained_runs", "tests.real_llm"]


def pytest_addoption(parser):
  parser.addoption("--runslow", action="store_true", default=False,
                   help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
  if config.getoption("--runslow"):
    return
  skip = pytest.mark.skip(reason="slow: pass --runslow to run it")
  for item in items:
    if "slow" in item.keywords:
      item.add_marker(skip)


def shared_data_dir() -> Path | None:
  """``$RACER_DATA_DIR``, else ``../shared/data`` beside the checkout."""
  env = os.environ.get("RACER_DATA_DIR")
  for candidate in ([Path(env)] if env else []) + [REPO.parent / "shared" /
                                                   "data"]:
    if candidate.is_dir():
      return candidate.resolve()
  return None


@pytest.fixture(scope="session")
def data_dir() -> Path:
  path = shared_data_dir()
  if path is None:
    pytest.skip("real data sets not found: set RACER_DATA_DIR to the shared "
                "data folder (../shared/data) to run this test")
  return path


@pytest.fixture(scope="session")
def cn100k(data_dir):
  """The CN-100K graph store built from the shared data (once per session)."""
  from racer_jax.kg import ingest, store
  path = data_dir / "conceptnet" / "cn100k" / "train.txt"
  if not path.is_file():
    pytest.skip(f"{path} not found")
  triples, report = ingest.read_triple_files(path)
  graph, build = store.build_graph(triples)
  return graph, report, build


@pytest.fixture(scope="session")
def demo_kg():
  from racer_jax.data import datasets
  from racer_jax.kg import ingest, store
  triples, _ = ingest.read_triple_files(datasets.DEMO_DIR / "kg.tsv")
  return store.build_graph(triples)[0]


def random_triples(seed: int, num_concepts: int = 60, num_triples: int = 150):
  """Random merged-relation triples (self-loops and duplicates included)
  and the rng that made them."""
  import numpy as np

  from racer_jax.kg import ingest, relations
  rng = np.random.default_rng(seed)
  t = ingest.Triples(
      concepts=[f"c{i}" for i in range(num_concepts)],
      head=rng.integers(0, num_concepts, num_triples),
      rel=rng.integers(0, relations.NUM_RELATIONS, num_triples).astype(
          np.int32),
      tail=rng.integers(0, num_concepts, num_triples),
      weight=rng.uniform(0.5, 3, num_triples).astype(np.float32))
  return t, rng


def random_graph(seed: int, num_concepts: int = 60, num_triples: int = 150):
  """A random merged-relation graph and the rng that made it."""
  from racer_jax.kg import store
  triples, rng = random_triples(seed, num_concepts, num_triples)
  return store.build_graph(triples)[0], rng


@pytest.fixture
def make_random_graph():
  return random_graph
