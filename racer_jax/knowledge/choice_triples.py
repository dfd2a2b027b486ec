"""KEAR's ConceptNet knowledge for a choice (``answer.choice_triples = k``).

Beside the GraphAgent's paths from the question toward a choice, the
AnswerAgent can be shown what ConceptNet says about the choice itself, as
KEAR (Xu et al., 2021) does: among the edges of the choice's concepts
``c -r-> v`` (inverse edges included), first those whose other end ``v`` is
a question concept (the question-choice triple KEAR looks for first), then
the rest by ``cos(enc(stem), emb(v))`` — the facts about the choice that
are closest to what the question talks about. The ``k`` best distinct
sentences are shown before the path sentences, in training and in
evaluation alike.

Every triple is read from the KG's adjacency, each one a one-hop path with
its global edge id, and re-checked with :meth:`KnowledgeGraph.has_edge`
(``verified``), so it counts in ``triples_verified_fraction`` like the
walker's paths.
"""

from __future__ import annotations

import numpy as np

from racer_jax.knowledge import path_text
from racer_jax.knowledge.path_text import RetrievedPath

DIRECT_BONUS = 10.0  # puts question-choice edges before any similarity


class ChoiceTriples:
  """Ranks the KG's triples about each choice of a question.

  Args:
    kg: the :class:`KnowledgeGraph`.
    concept_emb: float32 [V, d] unit concept embeddings (the workspace's).
    encoder: the :class:`TextEncoder` that made ``concept_emb``.
  """

  def __init__(self, kg, concept_emb, encoder):
    self.kg, self.concept_emb, self.encoder = kg, concept_emb, encoder

  def rank(self, stem_vector, question_concepts, choice_concepts,
           k: int) -> list[RetrievedPath]:
    """The ``k`` best triples about one choice (fewer when its concepts
    have fewer edges), best first.

    Args:
      stem_vector: float32 [d] ``enc(stem)``.
      question_concepts, choice_concepts: global concept ids.
    """
    if k <= 0:
      return []
    question = np.asarray(list(question_concepts), np.int64)
    # (score, choice concept, its edges, index among them); 3k per concept
    # leave room for sentences that repeat (an edge and its inverse)
    candidates = []
    for c in map(int, choice_concepts):
      edges = self.kg.out_edges(c)
      if not len(edges["dst"]):
        continue
      score = (self.concept_emb[edges["dst"]] @ stem_vector +
               DIRECT_BONUS * np.isin(edges["dst"], question))
      for j in np.argsort(-score, kind="stable")[:3 * k]:
        candidates.append((float(score[j]), c, edges, int(j)))
    candidates.sort(key=lambda x: -x[0])  # stable: concept order on ties
    seen, out = set(), []
    for _, c, edges, j in candidates:
      tail, rel = int(edges["dst"][j]), int(edges["rel"][j])
      triple = path_text.Triple(self.kg.concepts[c], self.kg.relations[rel],
                                self.kg.concepts[tail],
                                int(edges["edge_id"][j]))
      sentence = path_text.sentence(triple)
      if sentence in seen:
        continue
      seen.add(sentence)
      out.append(RetrievedPath([triple], 0.0, False,
                               self.kg.has_edge(c, rel, tail)))
      if len(out) == k:
        break
    return out

  def split(self, examples, subgraphs, k: int) -> list[list[list[
      RetrievedPath]]]:
    """Per question, per choice: its triples (question and choice
    concepts read from the question's subgraph)."""
    if not examples or k <= 0:
      return [[[] for _ in ex.choices] for ex in examples]
    stems = np.asarray(self.encoder.encode([ex.stem for ex in examples]),
                       np.float32)
    out = []
    for ex, sg, stem in zip(examples, subgraphs, stems):
      question = sg.nodes[sg.is_question]
      out.append([self.rank(stem, question, sg.nodes[sg.choice_mask[:, j]]
                            if j < sg.choice_mask.shape[1] else [], k)
                  for j in range(len(ex.choices))])
    return out


def knowledge_text(choice_paths: list[RetrievedPath],
                   paths: list[RetrievedPath], max_sentences: int) -> str:
  """One choice's knowledge: its own triples, then the path sentences
  (distinct sentences, at most ``max_sentences`` in all)."""
  return path_text.knowledge_text(
      [p.triples for p in choice_paths] + [p.triples for p in paths],
      max_sentences)
