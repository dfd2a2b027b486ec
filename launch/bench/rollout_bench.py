r"""The ``rollout`` benchmark (run through ``launch/benchmark.py rollout``).

Measures walker-steps per second (walkers x T; every method
computes all T steps) of the jitted rollout (per-question preparation
included) for a sweep of walker counts, B questions x W walkers of one
shape bucket (CommonsenseQA dev on CN-100K given a data directory, else the
demo's train split), against the plain-Python loop ``bench/python_walker.py``
(above ``--python_max_walkers`` timed on a subset of whole questions and
scaled per walker-step), the NumPy loop over hops batched over walkers
``bench/numpy_walker.py`` and, with torch, the same in eager PyTorch
``bench/torch_walker.py``; then the full training update against eager
PyTorch (without torch: the same JAX update op by op under
``jax.disable_jit()``). Same params and inputs everywhere; best of
``--repeats`` after a warm-up; JAX compile time (AOT) reported apart.
"""

import dataclasses
import time

import jax
import numpy as np

from configs import default, demo
from racer_jax import entry_point
from . import numpy_walker, timing, torch_walker
from . import python_walker as rl_reference
from racer_jax.rl import rollout as rollout_lib
from racer_jax.rl import walker_update as train_lib
from racer_jax.rl.walk_inputs import walk_inputs
from racer_jax.runs import builders
from racer_jax.runs.workspace import load_workspace


@dataclasses.dataclass(frozen=True)
class RolloutOptions:
  """The ``rollout`` benchmark's settings: one
  ``launch/benchmark.py`` flag per field, of the same name."""

  walkers: tuple[str, ...] = entry_point.option(
      ("1", "4", "16", "64", "256", "1024", "4096"),
      "rollout: walker counts.")
  walkers_per_question: int = entry_point.option(
      16,
      "rollout: W, walkers per question (B = walkers / W "
      "questions).")
  repeats: int = entry_point.option(
      5,
      "rollout: timed repeats (the best is reported).")
  prune: bool = entry_point.option(
      True,
      "rollout: semantic pruning to walker.top_k actions (else all "
      "D).")
  max_steps: int = entry_point.option(
      3,
      "rollout: T, hops per walk.")
  bucket: int = entry_point.option(
      -1,
      "rollout: shape bucket index (-1: the largest with enough "
      "questions).")
  python_max_walkers: int = entry_point.option(
      256,
      "rollout: most walkers the Python loop runs per count.")
  train_reference: str = entry_point.option(
      "auto",
      "rollout: reference of the training update.",
      choices=("auto", "torch_eager", "jax_disable_jit"))


class _RolloutBench:
  """The data, policy and methods of the ``rollout`` benchmark."""

  def __init__(self, data_dir, prep_dir, options: RolloutOptions):
    self.options = options
    real = data_dir is not None and (data_dir / "csqa").is_dir()
    self.data = "csqa dev on cn100k" if real else "demo train"
    config = default.get_config() if real else demo.get_config()
    config.walker.prune = options.prune
    config.walker.max_steps = options.max_steps
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
    need = (max(int(w) for w in options.walkers) //
            options.walkers_per_question)
    enough = [b for b in usable if len(usable[b]) >= need]
    self.bucket = (options.bucket if options.bucket >= 0 else max(enough)
                   if enough else max(usable, key=lambda b: len(usable[b])))
    self.usable = usable[self.bucket]
    self.train_cfg = builders.walker_train_config(config)
    self.cfg, self.weights = self.train_cfg.rollout, self.train_cfg.reward
    self.policy = builders.make_policy(config)
    self.optimizer = train_lib.make_optimizer(config.train.learning_rate,
                                              config.train.grad_clip)
    self.state = train_lib.create_train_state(
        self.policy, self.optimizer, config.seed, ws.concept_emb.shape[1])
    self.params = jax.device_get(self.state.params)
    self.p_teacher = float(config.train.p_teacher)
    self.torch = torch_walker.available()

  def inputs(self, walkers):
    """``(batch, inputs, B, W)`` for ``walkers`` = B x W (NumPy)."""
    options = self.options
    w = min(walkers, options.walkers_per_question)
    b = -(-walkers // w)
    batch = self.ds.batch(self.bucket,
                          self.usable[np.arange(b) % len(self.usable)], b)
    x = self.make_inputs(batch, self.ws.concept_emb, batch.query, batch.gold,
                         w)
    return batch, jax.device_get(x), b, w

  def sweep_row(self, walkers) -> dict:
    """Times every method on ``walkers``; seconds per rollout."""
    options = self.options
    _, x, b, w = self.inputs(walkers)
    cfg, weights, params, rel = (self.cfg, self.weights, self.params,
                                 self.ws.relation_emb)
    pt, repeats = self.p_teacher, options.repeats
    run = jax.jit(lambda p, x, r, k, pt: rollout_lib.rollout(
        self.policy, p, x, r, k, pt, cfg, weights))
    args = jax.device_put((params, x, rel, jax.random.PRNGKey(0), pt))
    t0 = time.perf_counter()
    compiled = run.lower(*args).compile()
    row = {"walkers": b * w, "questions": b, "walkers_per_question": w,
           "jax_compile_s": time.perf_counter() - t0}
    timing.timed(row, "jax", lambda: jax.block_until_ready(compiled(*args)),
           repeats)
    gen = np.random.default_rng(0)
    timing.timed(row, "numpy_batched", lambda: numpy_walker.rollout(
        params, x, rel, gen, pt, cfg, weights), repeats)
    if self.torch:
      import torch
      targs = (torch_walker.to_torch(params),
               torch_walker.inputs_to_torch(x),
               torch_walker.to_torch(rel), torch.Generator(), pt, cfg,
               weights)

      def torch_run():
        with torch.no_grad():
          torch_walker.rollout(*targs)
      timing.timed(row, "torch_eager", torch_run, repeats)
    sub = max(1, min(b, options.python_max_walkers // w))  # whole questions
    rows = [jax.tree.map(lambda a, i=i: a[i], x) for i in range(sub)]

    def python_loop():
      for r in rows:
        prep = rl_reference.prepare(params, r, rel, cfg)
        for start in r.starts:
          rl_reference.reference_walk(params, r, rel, start, rng=gen,
                                   p_teacher=pt, cfg=cfg, weights=weights,
                                   prep=prep)
    row["python_loop_s"] = timing.best(python_loop, min(repeats, 2)) * b / sub
    row["python_loop_timed_walkers"] = sub * w
    steps = b * w * cfg.max_steps
    for name in ("jax", "numpy_batched", "torch_eager", "python_loop"):
      if name + "_s" in row:
        row[name + "_steps_per_s"] = steps / row[name + "_s"]
    return row

  def train_update(self, walkers) -> dict:
    """The jitted update against its eager reference on ``walkers``."""
    options = self.options
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
           "train_update_jax_s": timing.best(lambda: jax.block_until_ready(
               compiled(*args)), options.repeats)}
    ref = options.train_reference
    if ref == "auto":
      ref = "torch_eager" if self.torch else "jax_disable_jit"
    if ref == "torch_eager":
      import torch
      t = self.config.train
      step = torch_walker.make_train_step(
          torch_walker.to_torch(self.params, requires_grad=True), cfg,
          t.learning_rate, t.grad_clip)
      targs = (torch_walker.batch_to_torch(batch),
               torch_walker.to_torch(self.ws.concept_emb),
               torch_walker.to_torch(self.ws.relation_emb),
               self.p_teacher, torch.Generator())
      ref_s = timing.best(lambda: step(*targs), options.repeats)
    else:
      def eager():
        with jax.disable_jit():
          jax.block_until_ready(update(*args))
      ref_s = timing.best(eager, 1)
    steps = b * w * cfg.rollout.max_steps
    out.update(train_update_reference=ref, train_update_reference_s=ref_s,
               train_update_speedup=ref_s / out["train_update_jax_s"],
               train_update_jax_walker_steps_per_second=steps /
               out["train_update_jax_s"])
    return out


def bench_rollout(data_dir, prep_dir, options: RolloutOptions) -> dict:
  """Runs the ``rollout`` benchmark, printing its table; returns figures."""
  bench = _RolloutBench(data_dir, prep_dir, options)
  config, cfg = bench.config, bench.cfg
  print(f"{bench.data}, bucket {bench.ds.buckets[bench.bucket]} "
        f"({len(bench.usable)} usable questions), prune={cfg.prune}, "
        f"T={cfg.max_steps}; walker-steps = walkers x T")
  print(f"{'walkers':>7} {'BxW':>8} {'jax ms':>8} {'compile s':>9} "
        f"{'numpy ms':>9} {'torch ms':>9} {'python ms':>10}  "
        f"{'jax steps/s':>11} {'x python':>8} {'x numpy':>7} {'x torch':>7}",
        flush=True)
  rows = []
  for walkers in sorted(int(w) for w in options.walkers):
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
  print(f"* Python loop timed on at most {options.python_max_walkers} "
        "walkers (whole questions) and scaled per walker-step")
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
      "max_steps": cfg.max_steps, "walkers_per_question":
      options.walkers_per_question,
      "p_teacher": bench.p_teacher,
      **timing.machine(),
      "timing": f"best (and median) of {options.repeats} after a warm-up",
      "python_loop_timed_walkers": top["python_loop_timed_walkers"],
      "sweep": rows}
  if bench.torch:
    import torch
    figures["torch_threads"] = torch.get_num_threads()
  return figures
