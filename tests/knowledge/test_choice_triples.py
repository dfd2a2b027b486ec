"""KEAR's choice triples: the ranking against a brute-force reference, and
the knowledge text the answer model is trained on."""


from racer_jax.agents import templates
from racer_jax.answer import inputs as answer_inputs
from racer_jax.knowledge.choice_triples import DIRECT_BONUS, ChoiceTriples, knowledge_text
from racer_jax.knowledge.path_text import RetrievedPath
from racer_jax.runs.workspace import make_encoder
from tests.trained_runs import QUIET


def brute_force(kg, emb, stem, question, concepts, k):
  """Every edge of every choice concept, scored and sorted (ties: concept
  order, then adjacency order), first ``k`` distinct sentences."""
  scored = []
  for ci, c in enumerate(concepts):
    lo, hi = int(kg.indptr[c]), int(kg.indptr[c + 1])
    for j, pos in enumerate(range(lo, hi)):
      tail = int(kg.dst[pos])
      score = float(emb[tail] @ stem) + DIRECT_BONUS * (tail in question)
      scored.append((-score, ci, j, c, int(kg.rel[pos]), tail))
  out, seen = [], set()
  for _, _, _, c, rel, tail in sorted(scored):
    s = templates.sentence(templates.Triple(kg.concepts[c], kg.relations[rel],
                                            kg.concepts[tail]))
    if s not in seen:
      seen.add(s)
      out.append((kg.concepts[c], kg.relations[rel], kg.concepts[tail]))
  return out[:k]


def test_ranking_matches_brute_force(retrieval_runs, demo_workspace):
  config, _, _ = retrieval_runs
  ws = demo_workspace
  encoder = make_encoder(config)
  ranker = ChoiceTriples(ws.kg, ws.concept_emb, encoder)
  data = ws.splits["dev"]
  got = ranker.split(data.examples, data.subgraphs, 3)
  stems = encoder.encode([ex.stem for ex in data.examples])
  direct = checked = 0
  for ex, sg, stem, per_choice in zip(data.examples, data.subgraphs, stems,
                                      got):
    assert len(per_choice) == len(ex.choices)
    question = set(map(int, sg.nodes[sg.is_question]))
    for j, paths in enumerate(per_choice):
      concepts = [int(c) for c in sg.nodes[sg.choice_mask[:, j]]]
      want = brute_force(ws.kg, ws.concept_emb, stem, question, concepts, 3)
      assert [(p.triples[0].head, p.triples[0].relation, p.triples[0].tail)
              for p in paths] == want
      for p in paths:
        t = p.triples[0]
        assert p.verified and ws.kg.has_edge(t.head, t.relation, t.tail)
        assert ws.kg.concept_id(t.head) in concepts
        direct += ws.kg.concept_id(t.tail) in question
      checked += len(paths)
  assert checked > 0 and direct > 0  # some question-choice edges shown


def test_knowledge_text_puts_choice_triples_first():
  own = [RetrievedPath([templates.Triple("oven", "usedfor", "bake")], 0.0,
                       False, True)]
  path = RetrievedPath([templates.Triple("cake", "_usedfor", "oven"),
                        templates.Triple("oven", "usedfor", "bake")], 1.0,
                       True, True)
  assert knowledge_text(own, [path], 6) == (
      "Oven is used for bake. Oven is used for cake.")
  assert knowledge_text(own, [path], 1) == "Oven is used for bake."
  assert knowledge_text([], [], 6) == ""


def test_training_knowledge_joins_choice_triples_and_paths(retrieval_runs,
                                                          demo_workspace):
  config, _, refiner_dir = retrieval_runs
  config = config.copy_and_resolve_references()
  config.answer.knowledge_workdir = str(refiner_dir)
  paths_only = answer_inputs.knowledge_for(config, None, ["dev"], **QUIET)
  config.answer.choice_triples = 2
  both = answer_inputs.knowledge_for(config, None, ["dev"], **QUIET)
  config.answer.knowledge_workdir = ""
  own_only = answer_inputs.knowledge_for(config, None, ["dev"], **QUIET)
  sentences = lambda text: [x + "." for x in text.rstrip(".").split(". ")
                           if x]
  shown = 0
  for p_row, b_row, o_row in zip(paths_only["dev"], both["dev"],
                                 own_only["dev"]):
    for p, b, o in zip(p_row, b_row, o_row):
      # the choice's own triples first, then the paths', distinct, capped
      want = list(dict.fromkeys(sentences(o) + sentences(p)))
      assert sentences(b) == want[:config.answer.max_sentences]
      assert len(sentences(o)) <= 2
      shown += bool(o)
  assert shown > 0


def test_open_book_and_choice_triples_share_one_workspace(
    retrieval_runs, demo_workspace, tmp_path, monkeypatch):
  config, _, _ = retrieval_runs
  config = config.copy_and_resolve_references()
  config.answer.knowledge_workdir = ""
  config.answer.choice_triples = 2
  concepts = list(demo_workspace.kg.concepts[:40])
  book = tmp_path / "openbook.txt"
  book.write_text("".join(f'"a {c} is a thing you can find"\n'
                          for c in concepts))
  config.openbook.file = str(book)
  own_only = answer_inputs.knowledge_for(config, None, ["dev"], **QUIET)
  config.use_openbook = True
  loads = []
  real = answer_inputs._knowledge_workspace
  monkeypatch.setattr(answer_inputs, "_knowledge_workspace",
                      lambda *a, **k: loads.append(1) or real(*a, **k))
  both = answer_inputs.knowledge_for(config, None, ["dev"], **QUIET)
  assert len(loads) == 1  # one grounding for the book and the triples
  ws = real(config, None, ["dev"], **QUIET)
  facts = answer_inputs.openbook_texts(config, None, ws, ["dev"], QUIET["log"])
  assert any(t for row in facts["dev"] for t in row)
  for f_row, o_row, b_row in zip(facts["dev"], own_only["dev"], both["dev"]):
    for f, o, b in zip(f_row, o_row, b_row):
      assert b == " ".join(t for t in (f, o) if t)  # the book's facts first
