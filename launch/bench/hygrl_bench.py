r"""The ``hygrl`` benchmark (run through ``launch/benchmark.py hygrl``).

Questions per second of HyGRL's jitted greedy beam search (the learned
policy as scorer; the per-question heuristics, i.e. adjacency, PPR,
Adamic-Adar and Jaccard from the padded edge list, included), batched over
B questions of one shape bucket (CommonsenseQA dev on CN-100K given a data
directory, else the demo's train split), against the plain-Python reference
of the same search ``bench/hygrl_python.py`` (one question at a time,
heuristics included; timed on at most ``--hygrl_python_questions``
questions and scaled per question), and of one full jitted RL update
(``make_hygrl_step(..., "rl")``: a sampled and a greedy search per
question, SCST + margin ranking, gradients, the optimizer step). θ comes
from ``calibrate`` on the loaded split, the policy params are freshly
initialized (seed 0). Best of ``--hygrl_repeats`` after a warm-up; JAX
compile times (AOT) are reported apart. The reference's sequences are
checked against the JAX ones on the questions it times.
"""

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from configs import default, demo
from racer_jax import entry_point
from racer_jax.hygrl import beam
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl import stage as hygrl_stage
from racer_jax.hygrl import state as hygrl_state
from racer_jax.hygrl import update as hygrl_update
from racer_jax.runs.workspace import load_workspace

from . import hygrl_python as reference
from . import timing


@dataclasses.dataclass(frozen=True)
class HygrlOptions:
  """The ``hygrl`` benchmark's settings: one
  ``launch/benchmark.py`` flag per field, of the same name."""

  hygrl_questions: int = entry_point.option(
      256,
      "hygrl: B, questions per batch (the bucket's usable ones, "
      "repeated if it has fewer).")
  hygrl_repeats: int = entry_point.option(
      5,
      "hygrl: timed repeats (the best is reported).")
  hygrl_bucket: int = entry_point.option(
      -1,
      "hygrl: shape bucket index (-1: the one with most usable "
      "questions).")
  hygrl_python_questions: int = entry_point.option(
      64,
      "hygrl: most questions the Python reference is timed on.")


def _usable(batch) -> np.ndarray:
  """bool [B]: real questions with question and gold concepts (NumPy
  version of ``HyGRLInputs.usable``)."""
  seeds = batch.graphs.nodes["is_question"] & batch.node_mask
  gold_col = np.maximum(batch.gold, 0)[:, None, None]
  gold = (np.take_along_axis(batch.choice_mask, gold_col, axis=2)[..., 0] &
          batch.node_mask & (batch.gold >= 0)[:, None])
  return batch.example_mask & seeds.any(1) & gold.any(1)


def _sequence(position) -> list:
  position = np.asarray(position)
  order = np.argsort(np.where(position >= 0, position, 10 ** 6),
                     kind="stable")
  return order[:int((position >= 0).sum())].tolist()


def _load(data_dir, prep_dir):
  """``(data name, config, workspace, split)``."""
  real = data_dir is not None and (data_dir / "csqa").is_dir()
  config = default.get_config() if real else demo.get_config()
  split = "dev" if real else "train"
  ws = load_workspace(config, data_dir if real else None, prep_dir, [split],
                      progress=False, log=lambda _: None)
  return ("csqa dev on cn100k" if real else "demo train"), config, ws, split


def bench_hygrl(data_dir, prep_dir, options: HygrlOptions) -> dict:
  """Runs the ``hygrl`` benchmark, printing its table; returns figures."""
  data, config, ws, split = _load(data_dir, prep_dir)
  ds, emb = ws.splits[split].dataset, ws.concept_emb
  usable = {b: np.flatnonzero(_usable(ds.batch(b, np.arange(len(m)),
                                                len(m))))
            for b, m in ds.members.items()}
  bucket = (options.hygrl_bucket if options.hygrl_bucket >= 0 else
            max(usable, key=lambda b: len(usable[b])))
  rows = usable[bucket]
  b = options.hygrl_questions
  batch = ds.batch(bucket, rows[np.arange(b) % len(rows)], b)
  cfg = hygrl_state.hygrl_config(config)
  theta = hygrl_stage.calibrate(config, ds, emb,
                                log=lambda s: print(f"calibration: {s}"))
  policy, optimizer, state = hygrl_state.create_state(config, emb.shape[1])
  params = jax.device_get(state.params)
  repeats = options.hygrl_repeats
  print(f"{data}, bucket {ds.buckets[bucket]} ({len(rows)} usable "
        f"questions), B={b}, policy MLP {tuple(config.hygrl.hidden_sizes)}, "
        f"d={emb.shape[1]}, k={cfg.beam.beam_width} tau={cfg.beam.tau} "
        f"D={cfg.beam.max_depth} L={cfg.beam.max_nodes} "
        f"window={cfg.beam.window}", flush=True)

  # The jitted greedy search: heuristics + beam, vmapped over questions.
  def greedy(params, batch, concept_emb):
    x = hygrl.hygrl_inputs(batch, concept_emb, cfg)

    def one(x):
      final, _ = hygrl.search(x, cfg, policy=policy, params=params)
      return final.position, beam.sufficient(
          x.adj, final.in_sequence, x.seeds, x.gold, cfg.beam.max_nodes + 1)
    return jax.vmap(one)(x)

  args = jax.device_put((params, batch, jnp.asarray(emb)))
  t0 = time.perf_counter()
  beam_fn = jax.jit(greedy).lower(*args).compile()
  beam_compile_s = time.perf_counter() - t0
  beam_s = timing.best(lambda: jax.block_until_ready(beam_fn(*args)), repeats)
  position, ok = jax.device_get(beam_fn(*args))

  # The plain-Python reference on a subset of whole questions.
  sub = max(1, min(b, options.hygrl_python_questions))
  questions = [reference.question_from_batch(batch, i, emb)
               for i in range(sub)]
  p64 = reference.float64_params(params)  # like device_put: done once
  results = []

  def python_loop():
    results.clear()
    for q in questions:
      results.append(reference.greedy_search(q, cfg, params=p64))
  python_s = timing.best(python_loop, min(repeats, 2))
  agree = sum(seq == _sequence(position[i]) and suff == bool(ok[i])
              for i, (seq, suff) in enumerate(results))

  # One full RL update (SCST + margin) on the same batch.
  step = hygrl_update.make_hygrl_step(policy, optimizer, cfg, "rl",
                                     donate=False)
  uargs = jax.device_put((state, batch, jnp.asarray(emb),
                          jnp.asarray(theta)))
  t0 = time.perf_counter()
  update_fn = step.lower(*uargs).compile()
  update_compile_s = time.perf_counter() - t0
  update_s = timing.best(
      lambda: jax.block_until_ready(update_fn(*uargs)), repeats)
  metrics = jax.device_get(update_fn(*uargs)[1])

  qps = {"jax": b / beam_s, "python": sub / python_s, "update": b / update_s}
  speedup = qps["jax"] / qps["python"]
  print(f"{'':<30} {'ms/batch':>10} {'questions/s':>12} {'compile s':>9} "
        f"{'x python':>8}")
  print(f"{f'jax greedy beam, B={b}':<30} {beam_s * 1e3:>10.2f} "
        f"{qps['jax']:>12,.1f} {beam_compile_s:>9.2f} {speedup:>8.1f}")
  print(f"{f'python reference, {sub} q*':<30} {python_s * 1e3:>10.2f} "
        f"{qps['python']:>12,.1f} {'-':>9} {1.0:>8.1f}")
  print(f"{f'jax RL update, B={b}':<30} {update_s * 1e3:>10.2f} "
        f"{qps['update']:>12,.1f} {update_compile_s:>9.2f} {'-':>8}")
  print(f"* timed on {sub} of the {b} questions (questions/s per question); "
        f"its sequences match the jitted search's on {agree}/{sub}")
  h = config.hygrl
  return {
      "beam_speedup_vs_python_reference": speedup,
      "beam_questions_per_second_jax": qps["jax"],
      "beam_questions_per_second_python": qps["python"],
      "update_questions_per_second": qps["update"],
      "beam_compile_s": beam_compile_s, "update_compile_s": update_compile_s,
      "beam_jax_s": beam_s, "python_reference_s": python_s,
      "update_s": update_s, "python_timed_questions": sub,
      "reference_agreement": agree, "questions": b,
      "distinct_questions": int(min(len(rows), b)), "data": data,
      "bucket": list(ds.buckets[bucket]),
      "update_metrics": {k: float(v) for k, v in metrics.items()},
      "config": {
          "beam_width": cfg.beam.beam_width, "tau": cfg.beam.tau,
          "max_depth": cfg.beam.max_depth, "max_nodes": cfg.beam.max_nodes,
          "window": cfg.beam.window, "hidden_sizes": list(h.hidden_sizes),
          "embed_dim": int(emb.shape[1]), "ppr_iters": cfg.ppr_iters,
          "restart_prob": cfg.restart_prob,
          "heuristic_tau": cfg.heuristic_tau,
          "pairs_per_step": cfg.pairs_per_step,
          "margin_weight": cfg.margin_weight, "seed": config.seed,
          "policy_choice": bool(h.policy_choice),
          "heuristic_choice": bool(h.heuristic_choice),
          "theta": [float(t) for t in theta]},
      **timing.machine(),
      "timing": f"best of {repeats} after a warm-up (python: best of "
                f"{min(repeats, 2)})"}
