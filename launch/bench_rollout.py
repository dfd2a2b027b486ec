r"""The ``rollout`` benchmark (run through ``launch/benchmark.py rollout``).

Measures walker-steps per second (walkers x T; every method
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
import os
import platform
from statistics import median
import time

from absl import flags
import jax
import numpy as np

from configs import default, demo
from racer_jax.driver import common
from racer_jax.driver.inputs import load_workspace
from racer_jax.rl import batched_reference, torch_reference
from racer_jax.rl import reference as rl_reference
from racer_jax.rl import rollout as rollout_lib
from racer_jax.rl import train as train_lib
from racer_jax.rl.inputs import walk_inputs
from racer_jax.xla_cpu import cpu_flags

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




def _times(fn, repeats: int) -> list[float]:
  """Wall times of ``fn()`` over ``repeats`` runs after one warm-up."""
  fn()
  times = []
  for _ in range(max(repeats, 1)):
    t0 = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t0)
  return times


def _best(fn, repeats: int) -> float:
  """Best wall time of ``fn()`` over ``repeats`` runs after one warm-up."""
  return min(_times(fn, repeats))


def _timed(row: dict, name: str, fn, repeats: int) -> None:
  """``row[name + "_s"]``: the best time; ``row[name + "_median_s"]``: the
  median (eager references vary more from run to run than the compiled
  program, so the ratios of medians are reported beside the best)."""
  times = _times(fn, repeats)
  row[name + "_s"], row[name + "_median_s"] = min(times), median(times)


def machine() -> dict:
  """What the ratios depend on: CPU model, its widest vector extension,
  library versions (eager PyTorch gains more than XLA from AVX-512)."""
  model, flags_ = platform.processor() or platform.machine(), cpu_flags()
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      model = next((value.strip() for key, _, value in
                    (line.partition(":") for line in f)
                    if key.strip() == "model name"), model)
  except OSError:
    pass
  isa = next((x for x in ("avx512f", "avx2", "avx", "sve", "asimd", "neon")
              if x in flags_), "unknown")
  out = {"cpu_model": model, "cpu_vector_isa": isa,
         "cpu_count": os.cpu_count(), "jax_version": jax.__version__,
         # racer_jax.xla_cpu adds a 512-bit vector width on AVX-512 CPUs.
         "xla_flags": os.environ.get("XLA_FLAGS", "")}
  try:
    import torch
    out["torch_version"] = torch.__version__
  except ImportError:
    pass
  return out


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
    _timed(row, "jax", lambda: jax.block_until_ready(compiled(*args)),
           repeats)
    gen = np.random.default_rng(0)
    _timed(row, "numpy_batched", lambda: batched_reference.rollout(
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
      _timed(row, "torch_eager", torch_run, repeats)
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
      # The same ratios from median times (run-to-run spread of the eager
      # references).
      **{f"median_speedup_vs_{name}": top[name + "_median_s"] /
         top["jax_median_s"] for name in ("numpy_batched", "torch_eager")
         if name + "_median_s" in top},
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
      "device": jax.devices()[0].device_kind, **machine(),
      "timing": f"best (and median) of {_REPEATS.value} after a warm-up",
      "python_loop_timed_walkers": top["python_loop_timed_walkers"],
      "sweep": rows}
  if bench.torch:
    import torch
    figures["torch_threads"] = torch.get_num_threads()
  return figures
