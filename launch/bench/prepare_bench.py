r"""The ``prepare`` benchmark (run through ``launch/benchmark.py prepare``).

Measures, on this machine:

* ``cn100k_ingest_seconds``: CN-100K triples -> merged graph -> ``.npz``;
* ``csqa_cn100k_seconds``: load + ground + extract all of CommonsenseQA
  train+dev+test on CN-100K (grounder index build included);
* ``extraction_speedup_vs_python_reference``: the vectorized extractor
  against the plain-Python reference
  (``launch/bench/python_extractor.py``) on the same questions,
  measured in the same run (on CN-100K subgraphs are tiny and NumPy's
  per-call overhead dominates; the full-size ratio is the one that
  matters);
* a synthetic graph of full-ConceptNet size (``racer_jax/kg/synthetic.py``;
  the first concepts are CN-100K's, hubs first, so real questions ground to
  hubs): ``fullsize_load_seconds`` (open the store, decode the vocabulary,
  build the name index, read ``indptr``), ``fullsize_questions_per_second``
  (extraction of real CommonsenseQA questions' seeds), and grounding cost on
  its 800k-concept vocabulary;
* ``peak_rss_gb``: the process's peak resident memory before the full-size
  plain-Python reference (``fullsize_speedup_vs_python_reference``), whose
  Python adjacency lists need more.
"""

import dataclasses
import os
import time

import numpy as np

from racer_jax import entry_point
from . import python_extractor, timing
from racer_jax.data import datasets, qa
from racer_jax.kg import grounding, ingest, store, subgraph, synthetic


@dataclasses.dataclass(frozen=True)
class PrepareOptions:
  """The ``prepare`` benchmark's settings: one
  ``launch/benchmark.py`` flag per field, of the same name."""

  fullsize_concepts: int = entry_point.option(
      800000,
      "Concepts of the synthetic full-size graph.")
  fullsize_triples: int = entry_point.option(
      2500000,
      "Triples of the synthetic graph (before inverses).")
  fullsize_questions: int = entry_point.option(
      3000,
      "CommonsenseQA questions extracted on the full-size graph.")
  reference_questions: int = entry_point.option(
      300,
      "Questions for the plain-Python reference.")
  max_hops: int = entry_point.option(
      2,
      "Subgraph max_hops.")


CSQA_SPLITS = ("train", "dev", "test")


def _extractor(kg, options):
  return subgraph.SubgraphExtractor(kg, max_hops=options.max_hops,
                                    max_nodes=200, max_edges=4096,
                                    max_degree=32)


def bench_prepare(data_dir, work_dir, options: PrepareOptions) -> dict:
  """Runs the ``prepare`` benchmark; returns its figures."""
  figures = {}
  cn_dir = data_dir / "conceptnet" / "cn100k"
  t0 = time.perf_counter()
  triples, _ = ingest.read_triple_files(cn_dir / "train.txt")
  kg, _ = store.build_graph(triples)
  kg.save(os.path.join(work_dir, "cn100k.npz"))
  figures["cn100k_ingest_seconds"] = time.perf_counter() - t0

  class _Csqa:
    data = type("D", (), {"dataset": "csqa"})

  t0 = time.perf_counter()
  examples = []
  for split in CSQA_SPLITS:
    examples += qa.load_jsonl(datasets.split_path(_Csqa, split, data_dir))[0]
  grounder = grounding.Grounder(kg.concepts)
  extractor = _extractor(kg, options)
  grounded, subs = [], []
  for ex in examples:
    g = grounder.ground(ex.stem, ex.choices)
    grounded.append(g)
    subs.append(extractor.extract(g.question_concepts, g.choice_concepts))
  seconds = time.perf_counter() - t0
  figures.update(csqa_questions=len(examples), csqa_cn100k_seconds=seconds,
                 csqa_cn100k_questions_per_second=len(examples) / seconds)

  # In-run reference: plain Python BFS on the same questions.
  sample = grounded[:options.reference_questions]
  ref = python_extractor.ReferenceExtractor(kg)
  t0 = time.perf_counter()
  for g in sample:
    ref.extract(g.question_concepts, g.choice_concepts, options.max_hops)
  ref_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  for g in sample:
    extractor.extract(g.question_concepts, g.choice_concepts)
  vec_s = time.perf_counter() - t0
  figures.update(reference_questions=len(sample),
                 reference_python_seconds=ref_s, vectorized_seconds=vec_s,
                 extraction_speedup_vs_python_reference=ref_s / vec_s)

  # Full-size synthetic graph; CN-100K concepts first, hubs first.
  t0 = time.perf_counter()
  by_degree = np.argsort(-kg.degrees(), kind="stable")
  names = [kg.concepts[i] for i in by_degree]
  full = synthetic.heavy_tailed_graph(options.fullsize_concepts,
                                      options.fullsize_triples,
                                      names=names, seed=0)
  full_path = os.path.join(work_dir, "fullsize.npz")
  full.save(full_path)
  figures["fullsize_generate_seconds"] = time.perf_counter() - t0
  figures.update(fullsize_concepts=full.num_concepts,
                 fullsize_edges=full.num_edges,
                 fullsize_max_degree=int(full.degrees().max()))
  del full
  t0 = time.perf_counter()
  loaded = store.KnowledgeGraph.load(full_path)
  loaded.get_concept_id("person")  # builds the name index
  int(np.asarray(loaded.indptr).sum())  # touches the CSR offsets
  figures["fullsize_load_seconds"] = time.perf_counter() - t0
  to_full = np.empty(kg.num_concepts, np.int64)
  to_full[by_degree] = np.arange(kg.num_concepts)
  to_full %= loaded.num_concepts  # a graph smaller than CN-100K (tests)
  full_ex = _extractor(loaded, options)
  questions = grounded[:options.fullsize_questions]
  t0 = time.perf_counter()
  sizes = []
  for g in questions:
    s = full_ex.extract(to_full[g.question_concepts],
                        [to_full[c] for c in g.choice_concepts])
    sizes.append(s.stats["candidates"])
  seconds = time.perf_counter() - t0
  figures.update(fullsize_questions=len(questions),
                 fullsize_extract_seconds=seconds,
                 fullsize_questions_per_second=len(questions) / seconds,
                 fullsize_candidates_p50=float(np.median(sizes)),
                 fullsize_candidates_max=int(np.max(sizes)))
  t0 = time.perf_counter()
  full_grounder = grounding.Grounder(loaded.concepts)
  figures["fullsize_grounder_build_seconds"] = time.perf_counter() - t0
  t0 = time.perf_counter()
  for ex in examples[:options.fullsize_questions]:
    full_grounder.ground(ex.stem, ex.choices)
  figures["fullsize_ground_questions_per_second"] = (
      min(len(examples), options.fullsize_questions) /
      (time.perf_counter() - t0))
  figures["peak_rss_gb"] = timing.peak_rss_gb()

  # In-run reference on the full-size graph, where hubs make it matter.
  sample = questions[:options.reference_questions]
  ref = python_extractor.ReferenceExtractor(loaded)
  t0 = time.perf_counter()
  for g in sample:
    ref.extract(to_full[g.question_concepts],
                [to_full[c] for c in g.choice_concepts], options.max_hops)
  ref_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  for g in sample:
    full_ex.extract(to_full[g.question_concepts],
                    [to_full[c] for c in g.choice_concepts])
  figures["fullsize_speedup_vs_python_reference"] = ref_s / (
      time.perf_counter() - t0)
  figures["peak_rss_with_reference_gb"] = timing.peak_rss_gb()
  return figures
