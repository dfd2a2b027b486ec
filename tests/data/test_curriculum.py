"""GraphDancer's curriculum sampler: difficulty features against a plain
BFS, easy-first sampling early, uniform after the ramp, determinism."""

import networkx as nx
import numpy as np
import pytest

from racer_jax.data import curriculum
from racer_jax.data.bucketed import BucketedDataset
from racer_jax.kg.subgraph import SubgraphExtractor


def _split(make_random_graph, seed=0, n=40):
  """Random questions: 1-3 question concepts, 5 one-concept choices."""
  graph, rng = make_random_graph(seed, num_concepts=70, num_triples=160)
  ex = SubgraphExtractor(graph, max_hops=2, max_nodes=60, max_edges=500,
                         max_degree=6)
  subgraphs, gold = [], []
  for _ in range(n):
    ids = rng.choice(70, 8, replace=False).tolist()
    subgraphs.append(ex.extract(ids[:int(rng.integers(1, 4))],
                                [[c] for c in ids[3:8]]))
    gold.append(int(rng.integers(0, 5)))
  return subgraphs, gold


def test_gold_distance_matches_networkx(make_random_graph):
  subgraphs, gold = _split(make_random_graph)
  for sg, g in zip(subgraphs, gold):
    graph = nx.DiGraph()
    graph.add_nodes_from(range(sg.num_nodes))
    graph.add_edges_from(zip(sg.senders.tolist(), sg.receivers.tolist()))
    sources = set(np.flatnonzero(sg.is_question).tolist())
    targets = set(np.flatnonzero(sg.choice_mask[:, g]).tolist())
    lengths = (nx.multi_source_dijkstra_path_length(graph, sources)
               if sources else {})
    want = min((lengths[t] for t in targets if t in lengths),
               default=sg.num_nodes)
    assert curriculum.gold_distance(sg, g) == want


def test_percentile_rank_ties_and_range():
  r = curriculum.percentile_rank(np.array([3.0, 1.0, 3.0, 2.0]))
  np.testing.assert_allclose(r, [5 / 6, 0.0, 5 / 6, 1 / 3])
  with pytest.raises(ValueError, match="weights"):
    curriculum.difficulty(np.zeros((4, 3)), (0.0, 0.0, 0.0))


def test_sampler_goes_from_easy_to_uniform(make_random_graph):
  subgraphs, gold = _split(make_random_graph, n=60)
  dataset = BucketedDataset(subgraphs, gold, np.zeros((60, 4), np.float32),
                            buckets=[(64, 512)], num_choices=5, max_degree=8)
  sched = curriculum.Schedule(start=0.1, ramp_fraction=0.5, temperature=0.05)
  sampler = curriculum.CurriculumSampler(
      dataset, curriculum.structural_features(subgraphs, gold), sched,
      num_steps=100)
  d = sampler.difficulty

  def mean_sampled(step, reps=30):
    out = []
    for r in range(reps):
      b, pos = sampler.positions_for_step(step, r, 8)
      out.append(d[dataset.members[b][pos]].mean())
    return float(np.mean(out))
  early, late = mean_sampled(0), mean_sampled(60)
  assert early < 0.3 < late  # easy first
  assert late == pytest.approx(d.mean(), abs=0.08)  # uniform after the ramp
  assert sched.competence(0, 100) == pytest.approx(0.1)
  assert sched.competence(50, 100) == 1.0
  a = sampler.batch_for_step(7, 3, 8)
  b = sampler.batch_for_step(7, 3, 8)
  np.testing.assert_array_equal(a.example_index, b.example_index)


@pytest.mark.slow  # ~25 s each: a short training run with evaluations
@pytest.mark.parametrize("graph", ["subgraph", "kg"])
def test_walker_training_with_curriculum_logs_competence(tmp_path, graph):
  from configs import test as test_config
  from racer_jax.eval import learning_curves
  from racer_jax.train import walker_stage
  config = test_config.get_config()
  config.prep_dir = str(tmp_path / "prep")
  config.walker.graph = graph  # both walkers take the easy-to-hard sampler
  config.curriculum.enabled = True
  config.train.eval_every = 10
  quiet = dict(progress=False, log=lambda _: None)
  last = walker_stage.train(config, None, tmp_path / "run", **quiet)
  assert 0.2 <= last["curriculum_competence"] <= 1.0
  curve = learning_curves.eval_curve(tmp_path / "run")
  assert [s for s, _ in curve] == [10, 20]
  result = learning_curves.compare([("a", tmp_path / "run")], target=-1.0)
  assert result["runs"]["a"]["updates_to_target"] == 10
  never = learning_curves.compare([("a", tmp_path / "run")], target=2.0)
  assert never["runs"]["a"]["updates_to_target"] is None
