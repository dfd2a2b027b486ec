"""The curriculum's difficulty features on the whole graph (the walker's
easy-to-hard sampler): the gold's hop distance against networkx's
BFS over the same capped graph, the seeds' candidate counts, and the
sampler drawing easy questions first from the one-shape goal batches."""

import networkx as nx
import numpy as np
import pytest

from configs import test as test_config
from racer_jax.data import curriculum
from racer_jax.walker import inputs as walker_inputs
from racer_jax.runs.workspace import load_workspace

QUIET = dict(progress=False, log=lambda _: None)


@pytest.fixture(scope="module")
def kg_split(tmp_path_factory):
  config = test_config.get_config()
  config.walker.bandwidth = 8  # a cap that drops edges: the walker's graph
  ws = load_workspace(config, None, tmp_path_factory.mktemp("prep"),
                      ["train"], **QUIET)
  graph = walker_inputs.whole_graph(config, ws, lambda _: None)
  dataset = walker_inputs.goal_data(config, ws, "train", lambda _: None)
  return config, graph, dataset


def test_gold_hops_match_networkx_on_the_capped_graph(kg_split):
  config, graph, dataset = kg_split
  horizon = config.walker.max_steps
  features = walker_inputs.structural_features(graph, dataset, horizon,
                                               chunk=16)
  assert features.shape == (len(dataset), 3)
  g = nx.DiGraph()
  g.add_nodes_from(range(graph.num_nodes))
  g.add_edges_from(zip(np.asarray(graph.src).tolist(),
                       np.asarray(graph.dst).tolist()))
  degree = np.diff(np.asarray(graph.ptr))
  seen_hops = set()
  for row in range(len(dataset)):
    qc = dataset.question_concepts[row]
    qc = qc[qc >= 0]
    gold = dataset.gold[row]
    targets = set()
    if gold >= 0:
      tc = dataset.choice_concepts[row, gold]
      targets = set(tc[tc >= 0].tolist())
    lengths = (nx.multi_source_dijkstra_path_length(g, set(qc.tolist()),
                                                    cutoff=horizon)
               if qc.size else {})
    want = min((lengths[t] for t in targets if t in lengths),
               default=horizon + 1)
    assert features[row, 0] == want, row
    seen_hops.add(want)
    assert features[row, 2] == qc.size
    assert features[row, 1] == pytest.approx(degree[qc].mean()
                                             if qc.size else 0.0)
  assert len(seen_hops) >= 2  # the check saw more than one distance


def test_goal_batches_go_from_easy_to_uniform(kg_split):
  config, graph, dataset = kg_split
  features = walker_inputs.structural_features(
      graph, dataset, config.walker.max_steps)
  sched = curriculum.Schedule(start=0.1, ramp_fraction=0.5, temperature=0.05)
  sampler = curriculum.CurriculumSampler(dataset, features, sched,
                                         num_steps=100)
  d = sampler.difficulty

  def mean_sampled(step, reps=30):
    out = []
    for r in range(reps):
      pos = sampler.positions_for_step(step, r, 8)
      out.append(d[pos].mean())
    return float(np.mean(out))
  assert mean_sampled(0) < 0.3 < mean_sampled(60)
  batch = sampler.batch_for_step(3, 1, 8)
  again = sampler.batch_for_step(3, 1, 8)
  np.testing.assert_array_equal(batch.example_index, again.example_index)
  rows = np.searchsorted(dataset.ids, batch.example_index[batch.example_mask])
  metrics = sampler.step_metrics(3, batch.example_index[batch.example_mask])
  assert metrics["curriculum_difficulty"] == pytest.approx(d[rows].mean())
  with pytest.raises(ValueError, match="feature rows"):
    curriculum.CurriculumSampler(dataset, features[:-1], sched)
