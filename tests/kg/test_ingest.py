"""ConceptNet ingestion: the literature's normalization, exactly."""

import gzip

import pytest

from racer_jax.errors import DataError
from racer_jax.kg import ingest, relations, store

M = '{"dataset": "/d/conceptnet/4/en", "weight": %s}'
# (line, comment) -- the comment says what must happen to it.
ASSERTIONS = [
    ("/a/1\t/r/IsA\t/c/en/dog/n\t/c/en/animal\t" + M % "2.0", "kept"),
    ("/a/2\t/r/IsA\t/c/fr/chien\t/c/en/dog\t" + M % "1.0", "non-English"),
    ("/a/3\t/r/AtLocation\t/c/en/Ice_Cream/n/wn/food\t/c/en/freezer\t" +
     M % "1.5", "POS suffix + case"),
    ("/a/4\t/r/HasA\t/c/en/car\t/c/en/wheel\t" + M % "3.0", "reversed"),
    ("/a/5\t/r/MotivatedByGoal\t/c/en/study\t/c/en/pass_exam\t" + M % "1.0",
     "reversed"),
    ("/a/6\t/r/ExternalURL\t/c/en/dog\thttp://dbpedia.org/resource/Dog\t" +
     M % "1.0", "URL tail -> non-English"),
    ("/a/7\t/r/SymbolOf\t/c/en/dove\t/c/en/peace\t" + M % "1.0",
     "unmerged relation"),
    ("/a/8\t/r/dbpedia/genre\t/c/en/jazz\t/c/en/music\t" + M % "1.0",
     "unmerged relation"),
    ("/a/9\t/r/IsA\t/c/en/3d_printer\t/c/en/printer\t" + M % "1.0",
     "non-alphabetic concept"),
    ("/a/10\t/r/Synonym\t/c/en/car\t/c/en/automobile\t" + M % "1.0",
     "relatedto w=1"),
    ("/a/11\t/r/RelatedTo\t/c/en/car/n\t/c/en/automobile\t" + M % "4.0",
     "duplicate after merge, higher weight wins"),
    ("/a/12\t/r/Synonym\t/c/en/car\t/c/en/car/n\t" + M % "1.0", "self-loop"),
    ("/a/13\t/r/DefinedAs\t/c/en/x-ray\t/c/en/radiation\t" + M % "1.0",
     "hyphen kept"),
    ("/a/14\t/r/HasContext\t/c/en/bat\t/c/en/sport\t" + M % "1.0",
     "kept unless pruned"),
]
MALFORMED = [
    "/a/15\t/r/IsA\t/c/en/cat\t/c/en/animal",  # 4 columns
    "/a/16\t/r/IsA\t/c/en/cat\t/c/en/animal\t{not json",
    "/a/17\t/r/IsA\t/c/en/cat\t/c/en/animal\t{\"dataset\": 1}",  # no weight
    "/a/18\tIsA\t/c/en/cat\t/c/en/animal\t" + M % "1.0",  # relation not /r/
]
EXPECTED = {  # (head, relation, tail) -> weight, after dedup
    ("dog", "isa", "animal"): 2.0,
    ("ice_cream", "atlocation", "freezer"): 1.5,
    ("wheel", "partof", "car"): 3.0,
    ("pass_exam", "causes", "study"): 1.0,
    ("car", "relatedto", "automobile"): 4.0,
    ("x-ray", "isa", "radiation"): 1.0,
    ("bat", "hascontext", "sport"): 1.0,
}


def _write(tmp_path, lines, name="assertions.csv", gz=False):
  path = tmp_path / (name + (".gz" if gz else ""))
  data = ("\n".join(lines) + "\n").encode()
  path.write_bytes(gzip.compress(data) if gz else data)
  return path


def _triples(graph):
  out = {}
  for h in range(graph.num_concepts):
    e = graph.out_edges(h)
    for d, r, w in zip(e["dst"], e["rel"], e["weight"]):
      if r < relations.NUM_RELATIONS:
        out[(graph.concepts[h], graph.relations[r], graph.concepts[d])] = w
  return out


@pytest.mark.parametrize("gz", [False, True])
def test_assertions_exact_triples(tmp_path, gz):
  lines = [l for l, _ in ASSERTIONS] + MALFORMED
  path = _write(tmp_path, lines, gz=gz)
  triples, report = ingest.read_conceptnet_assertions(path, on_bad_line="skip")
  graph, build = store.build_graph(triples)
  assert _triples(graph) == EXPECTED
  assert report.lines == len(lines)
  assert report.dropped["non_english"] == 2
  assert report.dropped["unmerged_relation"] == 2
  assert report.dropped["non_alphabetic_concept"] == 1
  assert report.dropped["malformed_line"] == 4
  assert dict(report.dropped_relations) == {"symbolof": 1, "dbpedia": 1}
  assert build.self_loops == 1 and build.duplicates == 1
  assert build.triples == len(EXPECTED)
  assert graph.num_edges == 2 * len(EXPECTED)  # inverses materialized
  assert len(report.bad_lines) == 4
  assert ":15:" in report.bad_lines[0] and ":16:" in report.bad_lines[1]


def test_assertions_malformed_line_raises_with_location(tmp_path):
  path = _write(tmp_path, [ASSERTIONS[0][0], MALFORMED[2]])
  with pytest.raises(DataError) as err:
    ingest.read_conceptnet_assertions(path)
  assert err.value.line == 2 and err.value.field == "metadata"
  assert str(path) in str(err.value)


def test_pruned_variant(tmp_path):
  lines = [l for l, _ in ASSERTIONS] + [
      "/a/x\t/r/IsA\t/c/en/someone\t/c/en/person\t" + M % "1.0"]
  triples, report = ingest.read_conceptnet_assertions(
      _write(tmp_path, lines), pruned=True)
  got = _triples(store.build_graph(triples)[0])
  assert ("bat", "hascontext", "sport") not in got
  assert not any("someone" in k for k in got)
  assert report.dropped["pruned"] == 2


def test_triple_files(tmp_path):
  path = _write(tmp_path, [
      "IsA\tdog\tanimal", "HasA\tcar\twheel", "SymbolOf\tdove\tpeace",
      "AtLocation\tice cream\tfreezer", "IsA\tsomeone's dog\tpet",
      "UsedFor\tknife\tcut\t0", "UsedFor\tfork\teat\t1", ""], "t.txt")
  triples, report = ingest.read_triple_files(path)
  got = _triples(store.build_graph(triples)[0])
  assert got == {("dog", "isa", "animal"): 1.0, ("wheel", "partof", "car"): 1.0,
                 ("ice_cream", "atlocation", "freezer"): 1.0,
                 ("fork", "usedfor", "eat"): 1.0}
  assert report.dropped == {"unmerged_relation": 1,
                            "non_alphabetic_concept": 1,
                            "nonpositive_score": 1, "blank_line": 1}


@pytest.mark.parametrize("line,field", [
    ("IsA\tdog", None), ("IsA\tdog\tanimal\tmany", "score"),
    ("IsA\t\tanimal", "head"), (b"IsA\tdo\xffg\tanimal", None)])
def test_triple_files_malformed(tmp_path, line, field):
  path = tmp_path / "bad.txt"
  raw = line if isinstance(line, bytes) else line.encode()
  path.write_bytes(b"IsA\tcat\tanimal\n" + raw + b"\n")
  with pytest.raises(DataError) as err:
    ingest.read_triple_files(path)
  assert err.value.line == 2 and err.value.field == field
  _, report = ingest.read_triple_files(path, on_bad_line="skip")
  assert report.dropped["malformed_line"] == 1 and report.kept == 1


def test_relation_table_is_the_17_merged_types():
  assert len(relations.MERGED_RELATIONS) == 17
  assert relations.merge_relation("/r/HasA") == (
      relations.MERGED_RELATIONS.index("partof"), True)
  assert relations.merge_relation("LocatedNear") == (
      relations.MERGED_RELATIONS.index("atlocation"), False)
  for name in ("hasprerequisite", "entails", "mannerof", "hasfirstsubevent"):
    assert relations.merge_relation(name)[0] == (
        relations.MERGED_RELATIONS.index("hassubevent"))
  assert relations.merge_relation("/r/ExternalURL") is None


@pytest.mark.data
def test_cn100k_counts(cn100k):
  graph, report, build = cn100k
  assert report.lines == 100_000
  assert report.kept == 97_867
  assert report.dropped == {"unmerged_relation": 858,
                            "non_alphabetic_concept": 1275}
  assert report.dropped_relations["nothasproperty"] == 339
  assert build.self_loops == 55 and build.duplicates == 509
  assert build.triples == 97_303
  assert graph.num_concepts == 75_915
  assert graph.num_edges == 194_606
  assert graph.has_edge("hockey", "receivesaction", "play_on_ice")
