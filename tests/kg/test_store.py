"""The CSR graph store: API, edge ids, memory-mapped round trip."""

import numpy as np
import pytest

from racer_jax.kg import relations, store
from tests.conftest import random_triples


def test_csr_matches_triples_and_inverses():
  t, _ = random_triples(0, 40, 200)
  graph, report = store.build_graph(t)
  r = relations.NUM_RELATIONS
  expected = set()
  for h, rel, tl in zip(t.head, t.rel, t.tail):
    if h != tl:
      expected.add((h, rel, tl))
      expected.add((tl, rel + r, h))
  got = set()
  for c in range(graph.num_concepts):
    e = graph.out_edges(c)
    assert np.all(np.diff(e["dst"]) >= 0)  # sorted by dst within a source
    got.update((c, int(rr), int(d)) for d, rr in zip(e["dst"], e["rel"]))
  assert got == expected
  assert report.triples * 2 == graph.num_edges == len(expected)
  assert sorted(graph.edge_id.tolist()) == list(range(graph.num_edges))
  for h, rel, tl in list(expected)[:50]:
    assert graph.has_edge(int(h), int(rel), int(tl))
  assert not graph.has_edge(0, 0, 0)  # self-loops are removed


def test_edge_ids_pair_with_inverses():
  graph, _ = store.build_graph(random_triples(1, 40, 200)[0])
  src = np.repeat(np.arange(graph.num_concepts), graph.degrees())
  by_id = {int(e): (int(s), int(r), int(d)) for s, r, d, e in zip(
      src, graph.rel, graph.dst, graph.edge_id)}
  r = relations.NUM_RELATIONS
  for eid, (s, rel, d) in by_id.items():
    s2, rel2, d2 = by_id[int(graph.inverse_edge_id(eid))]
    assert (s2, d2) == (d, s) and rel2 == (rel + r) % (2 * r)


def test_save_load_memory_mapped(tmp_path):
  graph, _ = store.build_graph(random_triples(2, 40, 200)[0])
  path = tmp_path / "kg.npz"
  graph.save(path)
  loaded = store.KnowledgeGraph.load(path)
  assert isinstance(loaded.dst, np.memmap)
  assert loaded.concepts == graph.concepts
  assert loaded.relations == relations.relation_names()
  for name in ("indptr", "dst", "rel", "weight", "edge_id"):
    np.testing.assert_array_equal(getattr(loaded, name), getattr(graph, name))
  eager = store.KnowledgeGraph.load(path, mmap=False)
  np.testing.assert_array_equal(eager.dst, graph.dst)


def test_api_on_demo(demo_kg):
  g = demo_kg
  cid = g.concept_id("toothbrush") if "toothbrush" in g else 0
  name = g.concepts[cid]
  assert g.degree(name) == g.degree(cid) == len(g.out_edges(cid)["dst"]) > 0
  pos = int(g.out_edges(cid)["pos"][0])
  head, rel_tail = g.triple_str(pos).split(" --", 1)
  assert head == name
  rel, tail = rel_tail.split("--> ")
  assert g.has_edge(name, rel, tail)
  with pytest.raises(KeyError):
    g.concept_id("no such concept")
  assert g.get_concept_id("no such concept") == -1
