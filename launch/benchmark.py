r"""Speed and memory benchmarks. Each prints a table, then one JSON line.

  python launch/benchmark.py prepare --data_dir=../shared/data

``prepare`` measures, on this machine:

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

  python launch/benchmark.py rollout [--data_dir=../shared/data]

``rollout`` measures walker-steps per second (walkers x T; every method
computes all T steps) of the jitted rollout (per-question preparation
included) for a sweep of walker counts, B questions x W walkers of one
shape bucket (CommonsenseQA dev on CN-100K given a data directory, else the
demo's train split), against the plain-Python loop ``rl/reference.py``
(above ``--python_max_walkers`` timed on a subset of whole questions and
scaled per walker-step), the NumPy loop over hops batched over walkers
``rl/batched_reference.py`` and, with torch, the same in eager PyTorch
``rl/torch_reference.py``; then the full training update against eager
PyTorch (without torch: the same JAX update op by op under
``jax.disable_jit()``). Same params and inputs everywhere; best of
``--repeats`` after a warm-up; JAX compile time (AOT) reported apart.
"""

import dataclasses
import json
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

from configs import default, demo  # noqa: E402
from racer_jax.data import datasets, qa  # noqa: E402
from racer_jax.driver import common  # noqa: E402
from racer_jax.driver.inputs import load_workspace  # noqa: E402
from racer_jax.kg import grounding, ingest, reference, store  # noqa: E402
from racer_jax.kg import subgraph, synthetic  # noqa: E402
from racer_jax.rl import batched_reference, torch_reference  # noqa: E402
from racer_jax.rl import reference as rl_reference  # noqa: E402
from racer_jax.rl import rollout as rollout_lib  # noqa: E402
from racer_jax.rl import train as train_lib  # noqa: E402
from racer_jax.rl.inputs import walk_inputs  # noqa: E402

_DATA_DIR = flags.DEFINE_string("data_dir", None,
                                "Data directory (default: $RACER_DATA_DIR).")
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

_WALKERS = flags.DEFINE_list("walkers", ["1", "4", "16", "64", "256", "1024",
                                         "4096"], "rollout: walker counts.")
_PER_Q = flags.DEFINE_integer("walkers_per_question", 16,
                              "rollout: W, walkers per question (B = "
                              "walkers / W questions).")
_REPEATS = flags.DEFINE_integer("repeats", 5, "rollout: timed repeats (the "
                                "best is reported).")
_PRUNE = flags.DEFINE_bool("prune", True, "rollout: semantic pruning to "
                           "walker.top_k actions (else all D).")
_MAX_STEPS = flags.DEFINE_integer("max_steps", 3, "rollout: T, hops per walk.")
_BUCKET = flags.DEFINE_integer("bucket", -1, "rollout: shape bucket index "
                               "(-1: the largest with enough questions).")
_PY_MAX = flags.DEFINE_integer("python_max_walkers", 256, "rollout: most "
                               "walkers the Python loop runs per count.")
_TRAIN_REF = flags.DEFINE_enum("train_reference", "auto",
                               ["auto", "torch_eager", "jax_disable_jit"],
                               "rollout: reference of the training update.")
_PREP_DIR = flags.DEFINE_string("prep_dir", None, "rollout: prepared-data "
                                "cache (default: a temporary folder).")



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


def _best(fn, repeats: int) -> float:
  """Best wall time of ``fn()`` over ``repeats`` runs after one warm-up."""
  fn()
  times = []
  for _ in range(max(repeats, 1)):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return min(times)


class _RolloutBench:
  """The data, policy and methods of the ``rollout`` benchmark."""

  def __init__(self, data_dir, prep_dir):
    real = data_dir is not None and (data_dir / "csqa").is_dir()
    self.data = "csqa dev on cn100k" if real else "demo train"
    config = default.get_config() if real else demo.get_config()
    config.walker.prune = _PRUNE.value
    config.walker.max_steps = _MAX_STEPS.value
    split = "dev" if real else "train"
    ws = load_workspace(config, data_dir if real else None, prep_dir,
                        [split], progress=False, log=lambda _: None)
    self.config, self.ws, self.ds = config, ws, ws.splits[split].dataset
    self.make_inputs = jax.jit(walk_inputs, static_argnums=4)
    usable = {}  # per bucket: questions with start and target nodes
    for b, members in self.ds.members.items():
      batch = self.ds.batch(b, np.arange(len(members)), len(members))
      x = self.make_inputs(batch, ws.concept_emb, batch.query, batch.gold, 1)
      usable[b] = np.flatnonzero(jax.device_get(x.start_mask)[:, 0])
    need = max(int(w) for w in _WALKERS.value) // _PER_Q.value
    enough = [b for b in usable if len(usable[b]) >= need]
    self.bucket = (_BUCKET.value if _BUCKET.value >= 0 else max(enough)
                   if enough else max(usable, key=lambda b: len(usable[b])))
    self.usable = usable[self.bucket]
    self.train_cfg = common.walker_train_config(config)
    self.cfg, self.weights = self.train_cfg.rollout, self.train_cfg.reward
    self.policy = common.make_policy(config)
    self.optimizer = train_lib.make_optimizer(config.train.learning_rate,
                                              config.train.grad_clip)
    self.state = train_lib.create_train_state(
        self.policy, self.optimizer, config.seed, ws.concept_emb.shape[1])
    self.params = jax.device_get(self.state.params)
    self.p_teacher = float(config.train.p_teacher)
    self.torch = torch_reference.available()

  def inputs(self, walkers):
    """``(batch, inputs, B, W)`` for ``walkers`` = B x W (NumPy)."""
    w = min(walkers, _PER_Q.value)
    b = -(-walkers // w)
    batch = self.ds.batch(self.bucket,
                          self.usable[np.arange(b) % len(self.usable)], b)
    x = self.make_inputs(batch, self.ws.concept_emb, batch.query, batch.gold,
                         w)
    return batch, jax.device_get(x), b, w

  def sweep_row(self, walkers) -> dict:
    """Times every method on ``walkers``; seconds per rollout."""
    _, x, b, w = self.inputs(walkers)
    cfg, weights, params, rel = (self.cfg, self.weights, self.params,
                                 self.ws.relation_emb)
    pt, repeats = self.p_teacher, _REPEATS.value
    run = jax.jit(lambda p, x, r, k, pt: rollout_lib.rollout(
        self.policy, p, x, r, k, pt, cfg, weights))
    args = jax.device_put((params, x, rel, jax.random.PRNGKey(0), pt))
    t0 = time.perf_counter()
    compiled = run.lower(*args).compile()
    row = {"walkers": b * w, "questions": b, "walkers_per_question": w,
           "jax_compile_s": time.perf_counter() - t0}
    row["jax_s"] = _best(lambda: jax.block_until_ready(compiled(*args)),
                         repeats)
    gen = np.random.default_rng(0)
    row["numpy_batched_s"] = _best(lambda: batched_reference.rollout(
        params, x, rel, gen, pt, cfg, weights), repeats)
    if self.torch:
      import torch
      targs = (torch_reference.to_torch(params),
               torch_reference.inputs_to_torch(x),
               torch_reference.to_torch(rel), torch.Generator(), pt, cfg,
               weights)

      def torch_run():
        with torch.no_grad():
          torch_reference.rollout(*targs)
      row["torch_eager_s"] = _best(torch_run, repeats)
    sub = max(1, min(b, _PY_MAX.value // w))  # whole questions
    rows = [jax.tree.map(lambda a, i=i: a[i], x) for i in range(sub)]

    def python_loop():
      for r in rows:
        prep = rl_reference.prepare(params, r, rel, cfg)
        for start in r.starts:
          rl_reference.reference_walk(params, r, rel, start, rng=gen,
                                   p_teacher=pt, cfg=cfg, weights=weights,
                                   prep=prep)
    row["python_loop_s"] = _best(python_loop, min(repeats, 2)) * b / sub
    row["python_loop_timed_walkers"] = sub * w
    steps = b * w * cfg.max_steps
    for name in ("jax", "numpy_batched", "torch_eager", "python_loop"):
      if name + "_s" in row:
        row[name + "_steps_per_s"] = steps / row[name + "_s"]
    return row

  def train_update(self, walkers) -> dict:
    """The jitted update against its eager reference on ``walkers``."""
    batch, _, b, w = self.inputs(walkers)
    cfg = dataclasses.replace(self.train_cfg, num_walkers=w)
    update = train_lib.make_train_step(self.policy, self.optimizer, cfg,
                                       donate=False)
    args = jax.device_put((self.state, batch, self.ws.concept_emb,
                           self.ws.relation_emb, np.float32(self.p_teacher)))
    t0 = time.perf_counter()
    compiled = update.lower(*args).compile()
    out = {"train_update_walkers": b * w,
           "train_update_compile_s": time.perf_counter() - t0,
           "train_update_jax_s": _best(lambda: jax.block_until_ready(
               compiled(*args)), _REPEATS.value)}
    ref = _TRAIN_REF.value
    if ref == "auto":
      ref = "torch_eager" if self.torch else "jax_disable_jit"
    if ref == "torch_eager":
      import torch
      t = self.config.train
      step = torch_reference.make_train_step(
          torch_reference.to_torch(self.params, requires_grad=True), cfg,
          t.learning_rate, t.grad_clip)
      targs = (torch_reference.batch_to_torch(batch),
               torch_reference.to_torch(self.ws.concept_emb),
               torch_reference.to_torch(self.ws.relation_emb),
               self.p_teacher, torch.Generator())
      ref_s = _best(lambda: step(*targs), _REPEATS.value)
    else:
      def eager():
        with jax.disable_jit():
          jax.block_until_ready(update(*args))
      ref_s = _best(eager, 1)
    steps = b * w * cfg.rollout.max_steps
    out.update(train_update_reference=ref, train_update_reference_s=ref_s,
               train_update_speedup=ref_s / out["train_update_jax_s"],
               train_update_jax_walker_steps_per_second=steps /
               out["train_update_jax_s"])
    return out


def bench_rollout(data_dir, prep_dir) -> dict:
  """Runs the ``rollout`` benchmark, printing its table; returns figures."""
  bench = _RolloutBench(data_dir, prep_dir)
  config, cfg = bench.config, bench.cfg
  print(f"{bench.data}, bucket {bench.ds.buckets[bench.bucket]} "
        f"({len(bench.usable)} usable questions), prune={cfg.prune}, "
        f"T={cfg.max_steps}; walker-steps = walkers x T")
  print(f"{'walkers':>7} {'BxW':>8} {'jax ms':>8} {'compile s':>9} "
        f"{'numpy ms':>9} {'torch ms':>9} {'python ms':>10}  "
        f"{'jax steps/s':>11} {'x python':>8} {'x numpy':>7} {'x torch':>7}",
        flush=True)
  rows = []
  for walkers in sorted(int(w) for w in _WALKERS.value):
    row = bench.sweep_row(walkers)
    rows.append(row)
    ms = lambda k, r=row: f"{r[k] * 1e3:.2f}" if k in r else "-"
    ratio = lambda k, r=row: f"{r[k] / r['jax_s']:.1f}" if k in r else "-"
    scaled = "*" if row["python_loop_timed_walkers"] < row["walkers"] else ""
    shape = f"{row['questions']}x{row['walkers_per_question']}"
    print(f"{row['walkers']:>7} {shape:>8} "
          f"{ms('jax_s'):>8} {row['jax_compile_s']:>9.2f} "
          f"{ms('numpy_batched_s'):>9} {ms('torch_eager_s'):>9} "
          f"{ms('python_loop_s') + scaled:>10}  "
          f"{row['jax_steps_per_s']:>11,.0f} {ratio('python_loop_s'):>8} "
          f"{ratio('numpy_batched_s'):>7} {ratio('torch_eager_s'):>7}",
          flush=True)
  print(f"* Python loop timed on at most {_PY_MAX.value} walkers (whole "
        "questions) and scaled per walker-step")
  top = rows[-1]
  train = bench.train_update(top["walkers"])
  print(f"training update, {top['questions']}x{top['walkers_per_question']}"
        f" walkers: jax {train['train_update_jax_s'] * 1e3:.1f} ms (compile "
        f"{train['train_update_compile_s']:.1f} s), "
        f"{train['train_update_reference']} "
        f"{train['train_update_reference_s'] * 1e3:.1f} ms: "
        f"{train['train_update_speedup']:.1f}x")
  k, d = top["jax_s"], config.subgraph.max_degree
  figures = {
      "walkers": top["walkers"],
      "speedup_vs_python_loop": top["python_loop_s"] / k,
      "speedup_vs_numpy_batched": top["numpy_batched_s"] / k,
      **({"speedup_vs_torch_eager": top["torch_eager_s"] / k}
         if "torch_eager_s" in top else {}),
      "jax_walker_steps_per_second": top["jax_steps_per_s"],
      "jax_compile_s": top["jax_compile_s"], **train,
      "data": bench.data, "bucket": list(bench.ds.buckets[bench.bucket]),
      "distinct_questions": int(min(len(bench.usable), top["questions"])),
      "prune": cfg.prune, "top_k": cfg.top_k,
      "max_degree": config.subgraph.max_degree,
      "num_actions": min(cfg.top_k if cfg.prune else d, d) + 1,
      "hidden": config.walker.hidden, "recurrent": config.walker.recurrent,
      "embed_dim": int(bench.ws.concept_emb.shape[1]),
      "max_steps": cfg.max_steps, "walkers_per_question": _PER_Q.value,
      "p_teacher": bench.p_teacher,
      "device": jax.devices()[0].device_kind, "cpu_count": os.cpu_count(),
      "timing": f"best of {_REPEATS.value} after a warm-up",
      "python_loop_timed_walkers": top["python_loop_timed_walkers"],
      "sweep": rows}
  if bench.torch:
    import torch
    figures["torch_threads"] = torch.get_num_threads()
  return figures


def main(argv):
  if len(argv) != 2 or argv[1] not in ("prepare", "rollout"):
    raise app.UsageError("usage: benchmark.py prepare|rollout [--flags]")
  data_dir = datasets.resolve_data_dir(_DATA_DIR.value)
  if argv[1] == "rollout":
    with tempfile.TemporaryDirectory() as work_dir:
      figures = bench_rollout(data_dir if data_dir and data_dir.is_dir()
                              else None, _PREP_DIR.value or work_dir)
    print(json.dumps(_rounded(figures)))
    return
  if data_dir is None or not data_dir.is_dir():
    raise app.UsageError("the prepare benchmark needs --data_dir (or "
                         "RACER_DATA_DIR) with conceptnet/cn100k and csqa/")
  with tempfile.TemporaryDirectory() as work_dir:
    figures = bench_prepare(data_dir, work_dir)
  width = max(map(len, figures))
  for key, value in figures.items():
    shown = f"{value:,.3f}" if isinstance(value, float) else f"{value:,}"
    print(f"{key:<{width}}  {shown}")
  print(json.dumps(_rounded(figures)))


def _rounded(tree):
  if isinstance(tree, dict):
    return {k: _rounded(v) for k, v in tree.items()}
  if isinstance(tree, list):
    return [_rounded(v) for v in tree]
  if isinstance(tree, float):  # 4 decimals, 4 significant digits below 1
    return round(tree, 4) if abs(tree) >= 1 else float(f"{tree:.4g}")
  return tree


if __name__ == "__main__":
  app.run(main)
