"""Question shards: each process loads only its shards, and the shards'
sub-batches put side by side are the global batch a one-process run sees."""

import jax
import numpy as np
import pytest

from configs import test as test_config
from racer_jax.data import sharded, subgraph_cache
from racer_jax.runs import builders
from racer_jax.runs.workspace import load_workspace

QUIET = dict(progress=False, log=lambda _: None)
BATCH = 8


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
  config = test_config.get_config()
  prep = tmp_path_factory.mktemp("prep")
  whole = load_workspace(config, None, prep, ["train"], **QUIET)
  return config, prep, whole.splits["train"]


def _load(config, prep, held, num_shards=2):
  ws = load_workspace(config, None, prep, ["train"], **QUIET,
                      shards={"train": (num_shards, held)})
  return ws.splits["train"]


def test_a_selected_read_equals_the_full_read(prepared):
  _, prep, whole = prepared
  path = prep / "train.subgraphs.npz"
  pick = [7, 0, len(whole.subgraphs) - 1]
  for want, got in zip([whole.subgraphs[i] for i in pick],
                       subgraph_cache.load_subgraphs(path, select=pick)):
    for field in ("nodes", "is_question", "choice_mask", "senders",
                  "receivers", "relation", "edge_id", "weight", "neighbors",
                  "hop"):
      a, b = getattr(want, field), getattr(got, field)
      assert a.dtype == b.dtype and np.array_equal(a, b), field
    assert want.stats == got.stats
  nodes, edges = subgraph_cache.subgraph_sizes(path)
  assert [s.num_nodes for s in whole.subgraphs] == nodes.tolist()
  assert [s.num_edges for s in whole.subgraphs] == edges.tolist()


def test_each_process_holds_only_its_shard(prepared):
  config, prep, whole = prepared
  total = len(whole.examples)
  bounds = sharded.shard_bounds(total, 2)
  for s in range(2):
    split = _load(config, prep, [s])
    assert split.dataset.num_questions == bounds[s + 1] - bounds[s]
    assert len(split.subgraphs) == bounds[s + 1] - bounds[s]
    assert len(split.examples) == total  # the text of the whole split
    np.testing.assert_array_equal(
        split.subgraphs[0].nodes, whole.subgraphs[bounds[s]].nodes)


def test_shard_batches_side_by_side_are_the_global_batch(prepared):
  config, prep, whole = prepared
  both = _load(config, prep, [0, 1]).dataset
  parts = [_load(config, prep, [s]).dataset for s in range(2)]
  per_epoch = both.batches_per_epoch(BATCH)
  assert per_epoch == parts[0].batches_per_epoch(BATCH)
  seen = []
  for step in range(per_epoch + 2):  # into the second epoch
    glob = both.batch_for_step(step, config.seed, BATCH, slice(0, BATCH))
    for s, part in enumerate(parts):
      mine = part.batch_for_step(step, config.seed, BATCH,
                                 slice(s * BATCH // 2, (s + 1) * BATCH // 2))
      rows = slice(s * BATCH // 2, (s + 1) * BATCH // 2)
      jax.tree.map(lambda g, m, rows=rows: np.testing.assert_array_equal(
          g[rows], m), glob, mine)
    bounds = sharded.shard_bounds(len(whole.examples), 2)
    index = glob.example_index
    assert np.all((index[:BATCH // 2] < bounds[1]) |
                  ~glob.example_mask[:BATCH // 2])
    assert np.all(index[BATCH // 2:][glob.example_mask[BATCH // 2:]]
                  >= bounds[1])
    # a real row is the question its index names
    for row in np.flatnonzero(glob.example_mask):
      q = index[row]
      assert glob.gold[row] == whole.examples[q].answer_index
      n = whole.subgraphs[q].num_nodes
      np.testing.assert_array_equal(glob.graphs.nodes["concept"][row][:n],
                                    whole.subgraphs[q].nodes)
    if step < per_epoch:
      seen += index[glob.example_mask].tolist()
  assert sorted(seen) == list(range(len(whole.examples)))  # each once


def test_wrong_rows_and_uneven_shards_are_refused(prepared):
  config, prep, _ = prepared
  part = _load(config, prep, [1]).dataset
  with pytest.raises(ValueError, match="not those of shards"):
    part.batch_for_step(0, 0, BATCH, slice(0, BATCH // 2))
  with pytest.raises(ValueError, match="not divisible"):
    part.batch_for_step(0, 0, 7)
  with pytest.raises(ValueError, match="evenly"):
    sharded.local_shards(3, 0, 2)


def test_impossible_shard_settings_name_the_key():
  from racer_jax.errors import ConfigError
  from racer_jax.runs.config_checks import check_config
  config = test_config.get_config()
  config.batch.batch_size, config.batch.shards = 8, 3
  with pytest.raises(ConfigError, match="batch.shards=3"):
    check_config(config)
  config.batch.shards = 2
  config.curriculum.enabled = True
  check_config(config)  # each value is possible; the pair is not:
  with pytest.raises(ConfigError, match="curriculum.enabled"):
    builders.question_shards(config)
