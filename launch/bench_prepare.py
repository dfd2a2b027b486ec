r"""The ``prepare`` benchmark (run through ``launch/benchmark.py prepare``).

Measures, on this machine:

* ``cn100k_ingest_seconds``: CN-100K triples -> merged graph -> ``.npz``;
* ``csqa_cn100k_seconds``: load + ground + extract all of CommonsenseQA
  train+dev+test on CN-100K (grounder index build included);
* ``extraction_speedup_vs_python_reference``: the vectorized extractor
  against the plain-Python reference (``racer_jax/kg/reference.py``) on the
  same questions, measured in the same run (on CN-100K subgraphs are tiny
  and NumPy's per-call overhead dominates; the full-size ratio is the one
  that matters);
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

import os
import resource
import time

from absl import flags
import numpy as np

from racer_jax.data import datasets, qa
from racer_jax.kg import grounding, ingest, reference, store
from racer_jax.kg import subgraph, synthetic

_CONCEPTS = flags.DEFINE_integer("fullsize_concepts", 800_000,
                                 "Concepts of the synthetic full-size graph.")
_TRIPLES = flags.DEFINE_integer("fullsize_triples", 2_500_000,
                                "Triples of the synthetic graph (before "
                                "inverses).")
_FULL_Q = flags.DEFINE_integer("fullsize_questions", 3000,
                               "CommonsenseQA questions extracted on the "
                               "full-size graph.")
_REF_Q = flags.DEFINE_integer("reference_questions", 300,
                              "Questions for the plain-Python reference.")
_MAX_HOPS = flags.DEFINE_integer("max_hops", 2, "Subgraph max_hops.")

CSQA_SPLITS = ("train", "dev", "test")


def _peak_rss_gb() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def _extractor(kg):
  return subgraph.SubgraphExtractor(kg, max_hops=_MAX_HOPS.value,
                                    max_nodes=200, max_edges=4096,
                                    max_degree=32)


def bench_prepare(data_dir, work_dir) -> dict:
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
  extractor = _extractor(kg)
  grounded, subs = [], []
  for ex in examples:
    g = grounder.ground(ex.stem, ex.choices)
    grounded.append(g)
    subs.append(extractor.extract(g.question_concepts, g.choice_concepts))
  seconds = time.perf_counter() - t0
  figures.update(csqa_questions=len(examples), csqa_cn100k_seconds=seconds,
                 csqa_cn100k_questions_per_second=len(examples) / seconds)

  # In-run reference: plain Python BFS on the same questions.
  sample = grounded[:_REF_Q.value]
  ref = reference.ReferenceExtractor(kg)
  t0 = time.perf_counter()
  for g in sample:
    ref.extract(g.question_concepts, g.choice_concepts, _MAX_HOPS.value)
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
  full = synthetic.heavy_tailed_graph(_CONCEPTS.value, _TRIPLES.value,
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
  full_ex = _extractor(loaded)
  questions = grounded[:_FULL_Q.value]
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
  for ex in examples[:_FULL_Q.value]:
    full_grounder.ground(ex.stem, ex.choices)
  figures["fullsize_ground_questions_per_second"] = (
      min(len(examples), _FULL_Q.value) / (time.perf_counter() - t0))
  figures["peak_rss_gb"] = _peak_rss_gb()

  # In-run reference on the full-size graph, where hubs make it matter.
  sample = questions[:_REF_Q.value]
  ref = reference.ReferenceExtractor(loaded)
  t0 = time.perf_counter()
  for g in sample:
    ref.extract(to_full[g.question_concepts],
                [to_full[c] for c in g.choice_concepts], _MAX_HOPS.value)
  ref_s = time.perf_counter() - t0
  t0 = time.perf_counter()
  for g in sample:
    full_ex.extract(to_full[g.question_concepts],
                    [to_full[c] for c in g.choice_concepts])
  figures["fullsize_speedup_vs_python_reference"] = ref_s / (
      time.perf_counter() - t0)
  figures["peak_rss_with_reference_gb"] = _peak_rss_gb()
  return figures
