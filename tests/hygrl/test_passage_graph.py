"""The passage graph, seed linking, gold passages and subgraphs."""

import numpy as np
import pytest

from configs import hygrl_2wiki
from racer_jax.data import multihop
from racer_jax.errors import DataError
from racer_jax.hygrl import multihop_workspace
from racer_jax.kg import passage_graph
from tests.hygrl import tiny


def _titles_texts():
  return [t for t, _ in tiny.CORPUS], [x for _, x in tiny.CORPUS]


def test_mentions_links_and_title_forms():
  titles, texts = _titles_texts()
  g = passage_graph.build_passage_graph(titles, texts)
  kg, p = g.kg, g.num_passages
  name = lambda n: kg.concepts[n]

  def out(node_title, kind):
    n = kg.concept_id(f"{kind}:{node_title}")
    return {(kg.relations[r], name(d)) for d, r in zip(
        kg.dst[kg.indptr[n]:kg.indptr[n + 1]],
        kg.rel[kg.indptr[n]:kg.indptr[n + 1]])}

  assert ("mentions", "E:Ermengarde of Tours") in out("Lothair II", "P")
  assert ("links", "E:Ermengarde of Tours") in out("Lothair II", "E")
  assert ("describes", "P:Lothair II") in out("Lothair II", "E")
  # the disambiguated title is found by its base name, "Tours" inside the
  # longer "Ermengarde of Tours" is not a mention (longest match)
  assert ("mentions", "E:Mohan Kumar (director)") in out("Aas Ka Panchhi", "P")
  assert ("mentions", "E:Tours") not in out("Lothair II", "P")
  # a passage does not mention itself
  assert ("mentions", "E:Lothair II") not in out("Lothair II", "P")
  assert p == len(titles) and g.num_nodes == 2 * p


def test_link_is_case_insensitive_and_counts_spans():
  titles, texts = _titles_texts()
  g = passage_graph.build_passage_graph(titles, texts)
  seeds, spans = g.link("When did Lothair Ii's mother die?")
  assert [g.kg.concepts[s] for s in seeds] == ["E:Lothair II"]
  assert spans == 1
  seeds, spans = g.link("Which film was released first, Aas Ka Panchhi or "
                        "Phoolwari?")
  assert spans == 2
  assert {g.kg.concepts[s] for s in seeds} == {"E:Aas Ka Panchhi",
                                               "E:Phoolwari"}
  # a lower-case common word is not a mention
  assert g.link("the paris of tours")[1] == 0


def test_gold_passages_exact_and_by_rule(tmp_path):
  data = multihop.load_2wiki(tiny.write(tmp_path))
  q = {x.id: x for x in data.questions}
  index = {t: i for i, t in enumerate(data.titles)}
  assert q["q-lothair"].exact
  assert q["q-lothair"].gold == ((index["Lothair II"],),
                                 (index["Ermengarde of Tours"],))
  # "Mohan Kumar" matches "Mohan Kumar (director)" by the rule; "Nobody
  # Known" matches nothing and is counted
  assert not q["q-director"].exact
  assert q["q-director"].gold == ((index["Aas Ka Panchhi"],),
                                  (index["Mohan Kumar (director)"],))
  assert q["q-director"].unmatched == 1


def test_bad_evidence_names_file_line_and_field(tmp_path):
  bad = [dict(tiny.QUESTIONS[0]), dict(tiny.QUESTIONS[1], evidence="x")]
  root = tiny.write(tmp_path, questions=bad)
  with pytest.raises(DataError, match=r"questions.jsonl:2.*evidence"):
    multihop.load_2wiki(root)


def _config():
  config = hygrl_2wiki.get_config()
  config.text.encoder = "static"
  config.multihop.max_nodes = 16
  config.multihop.max_edges = 64
  return config


def test_graph_comes_from_the_corpus_alone(tmp_path):
  """The same graph, vectors and subgraphs whether or not the question file
  carries evidence; only the gold mask differs."""
  config = _config()
  a = multihop_workspace.prepare(config, tiny.write(tmp_path / "a"),
                                 tmp_path / "ca", log=lambda _: None,
                                 progress=False)
  b = multihop_workspace.prepare(
      config, tiny.write(tmp_path / "b", evidence=False), tmp_path / "cb",
      log=lambda _: None, progress=False)
  for field in ("indptr", "dst", "rel", "edge_id"):
    np.testing.assert_array_equal(getattr(a.graph.kg, field),
                                  getattr(b.graph.kg, field))
  np.testing.assert_array_equal(a.node_vecs, b.node_vecs)
  for key in ("nodes", "seeds", "senders", "receivers", "edge_mask"):
    np.testing.assert_array_equal(a.arrays[key], b.arrays[key])
  assert a.arrays["gold"].any() and not b.arrays["gold"].any()
  assert all(not q.gold for q in b.data.questions)


def test_subgraph_holds_seeds_first_and_the_two_hop_gold(tmp_path):
  ws = multihop_workspace.prepare(_config(), tiny.write(tmp_path),
                                  tmp_path / "c", log=lambda _: None,
                                  progress=False)
  nodes, seeds = ws.arrays["nodes"][0], ws.arrays["seeds"][0]
  names = [ws.graph.kg.concepts[n] for n in nodes if n >= 0]
  assert names[0] == "E:Lothair II" and seeds[0] and not seeds[1:].any()
  # entity -> passage -> entity -> passage: the mother's passage is inside
  assert "P:Ermengarde of Tours" in names
  gold = {ws.graph.kg.concepts[n] for n in nodes[ws.arrays["gold"][0]]}
  assert gold == {"P:Lothair II", "P:Ermengarde of Tours"}
  em = ws.arrays["edge_mask"][0]
  s, r = ws.arrays["senders"][0][em], ws.arrays["receivers"][0][em]
  assert set(zip(s.tolist(), r.tolist())) == set(zip(r.tolist(),
                                                     s.tolist()))


def test_passage_tools_read_passages_and_name_nodes():
  from racer_jax.graphdancer.tools import PassageGraphTools, ToolError
  titles, texts = _titles_texts()
  g = passage_graph.build_passage_graph(titles, texts)
  tools = PassageGraphTools(g.kg, texts)
  # a bare title names the passage, case does not matter
  assert tools.retrieve_node("lothair ii") == "P:Lothair II"
  text, _ = tools.call("NodeFeature", ["Lothair II", "text"])
  assert text == texts[0]
  names, triples = tools.call("NeighbourCheck", ["P:Lothair II", "mentions"])
  assert "E:Ermengarde of Tours" in names
  assert all(t.relation == "mentions" for t in triples)
  with pytest.raises(ToolError, match="is an entity"):
    tools.call("NodeFeature", ["E:Lothair II", "text"])
  with pytest.raises(ToolError, match="name, text, degree, relations"):
    tools.call("NodeFeature", ["P:Lothair II", "colour"])
