r"""The ``kg_rollout`` benchmark (``launch/benchmark.py kg_rollout``): the
whole-graph walker's speed and memory.

``--size``: ``cn100k`` (the real graph, from ``--data_dir``; the default
walker), ``multihopkg`` (the synthetic graph MultiHopKG's own code was
timed on here: 80k entities, 400k directed facts, bandwidth 400, 200-dim
vectors, an LSTM history of width 200, no pruning, as MultiHopKG scores
its whole action space) or ``fullsize`` (800k concepts, 5M directed edges,
``launch/benchmark.py prepare``'s generator; the default walker). Vectors
are random unit vectors (the speed does not depend on their values).

Walkers: ``--kg_walkers`` (4096) = questions x ``--kg_walkers_per_question``
starting on random concepts, each question's target a few concepts, one
of them two hops away. Timed, best (and median) of ``--kg_repeats`` after
a warm-up, in one process: the jitted inference rollout (sampling, no
teacher) and training update (rollout with the BFS teacher, losses,
gradients, Adam), the same update without pruning, and the NumPy and
eager-PyTorch batched-per-hop walks (``launch/bench/kg_numpy_walker.py``,
``launch/bench/kg_torch_walker.py``) on the same parameters and uniforms,
whose walks are checked against the JAX walks in the same run.
"""

import dataclasses
import time
from statistics import median

import jax
import jax.numpy as jnp
import numpy as np

from configs import default
from racer_jax import entry_point
from . import kg_numpy_walker, kg_torch_walker, timing
from .kg_torch_walker import to_torch
from racer_jax.data import prepare
from racer_jax.data.goal_batch import GoalBatch
from racer_jax.walker import whole_graph as wg
from racer_jax.kg import bandwidth as bandwidth_lib
from racer_jax.kg import synthetic
from racer_jax.walker import rollout, update as walker_update
from racer_jax.walker import update as train_lib
from racer_jax.walker.policy import WalkerPolicy
from racer_jax.walker.reward import RewardWeights
from racer_jax.walker.rollout import RolloutConfig


@dataclasses.dataclass(frozen=True)
class KgRolloutOptions:
  """The ``kg_rollout`` benchmark's settings: one
  ``launch/benchmark.py`` flag per field, of the same name."""

  size: str = entry_point.option(
      "cn100k",
      "kg_rollout: which graph.",
      choices=("cn100k", "multihopkg", "fullsize"))
  kg_walkers: int = entry_point.option(
      4096,
      "kg_rollout: walkers.")
  kg_walkers_per_question: int = entry_point.option(
      16,
      "kg_rollout: walkers per question.")
  kg_repeats: int = entry_point.option(
      5,
      "kg_rollout: timed repeats.")
  kg_baselines: tuple[str, ...] = entry_point.option(
      ("numpy", "torch"),
      "kg_rollout: baselines to time (numpy, torch; empty for "
      "none).")
  kg_max_steps: int = entry_point.option(
      3,
      "kg_rollout: hops.")


# size: (embed dim, hidden, recurrent, bandwidth, prune)
WALKERS = {"cn100k": (64, 256, "gru", 256, True),  # configs/csqa.py's walker
           "multihopkg": (200, 200, "lstm", 400, False),
           "fullsize": (64, 256, "gru", 256, True)}


def _graph(size, data_dir, log):
  if size == "multihopkg":
    return synthetic.multihopkg_graph()
  if size == "fullsize":
    return synthetic.heavy_tailed_graph(800_000, 2_500_000)
  if data_dir is None:
    raise ValueError("--size=cn100k needs --data_dir with conceptnet/cn100k")
  config = default.get_config()
  kg, _ = prepare.build_kg(config, data_dir)
  return kg


def _unit(x):
  return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _inputs(kg, table, walkers, per_q, rng):
  """Questions on random concepts with edges; targets: a concept two hops
  from the first start (when there is one) and three random concepts."""
  b = walkers // per_q
  has = np.flatnonzero(np.diff(table.ptr) > 0)
  starts = rng.choice(has, (b, per_q)).astype(np.int32)
  targets = rng.choice(has, (b, 4)).astype(np.int32)
  for i in range(b):
    u = int(starts[i, 0])
    for _ in range(2):
      lo, hi = table.ptr[u], table.ptr[u + 1]
      if hi > lo:
        u = int(table.dst[rng.integers(lo, hi)])
    targets[i, 0] = u
  return targets, starts


def bench_kg_rollout(data_dir, options: KgRolloutOptions,
                     log=print) -> dict:
  """Runs the ``kg_rollout`` benchmark, logging its table; returns figures."""
  size = options.size
  dim, hidden, recurrent, bw, prune = WALKERS[size]
  rng = np.random.default_rng(0)
  t0 = time.perf_counter()
  kg = _graph(size, data_dir, log)
  table = bandwidth_lib.candidate_table(kg, bw)
  report = bandwidth_lib.bandwidth_report(kg, bw)
  build_s = time.perf_counter() - t0
  emb = _unit(rng.normal(size=(kg.num_concepts, dim)))
  rel_emb = _unit(rng.normal(size=(kg.num_relations, dim)))
  log(f"{size}: {kg.num_concepts:,} concepts, {kg.num_edges:,} edges "
      f"(built in {build_s:.1f} s); bandwidth {bw}: "
      f"{report['nodes_over_bandwidth']:,} nodes over it, "
      f"{report['edges_dropped_share']:.2%} of edges dropped")
  graph = wg.from_table(table, emb)
  rel_dev = jnp.asarray(rel_emb)
  walkers, per_q = options.kg_walkers, options.kg_walkers_per_question
  t_max = options.kg_max_steps
  targets, starts = _inputs(kg, table, walkers, per_q, rng)
  b = starts.shape[0]
  q_idx = rng.integers(0, kg.num_concepts, b)
  inputs = rollout.GoalInputs(
      query=jnp.asarray(emb[q_idx]), target=jnp.asarray(emb[targets[:, 0]]),
      target_concepts=jnp.asarray(targets), starts=jnp.asarray(starts),
      start_mask=jnp.ones(starts.shape, bool))
  cfg = RolloutConfig(max_steps=t_max, top_k=16, prune=prune)
  policy = WalkerPolicy(hidden=hidden, recurrent=recurrent)
  optimizer = train_lib.make_optimizer(1e-3, 1.0)
  state = train_lib.create_train_state(policy, optimizer, 0, dim)
  weights = RewardWeights()
  uniforms = jax.random.uniform(jax.random.PRNGKey(1), (b, per_q, t_max, 2))

  def compiled(rollout_cfg):
    fn = jax.jit(lambda p, x, u: rollout.rollout(
        policy, p, graph, x, rel_dev, None, 0.0, rollout_cfg, weights,
        uniforms=u, teacher=False))
    t0 = time.perf_counter()
    fn = fn.lower(state.params, inputs, uniforms).compile()
    return fn, time.perf_counter() - t0

  # pruning scores: gathers of candidate vectors vs per-question tables
  modes = {}
  for tables in ((False, True) if prune else (False,)):
    fn, c_s = compiled(dataclasses.replace(cfg, score_tables=tables))
    run = lambda fn=fn: jax.block_until_ready(fn(state.params, inputs,
                                                 uniforms))
    modes[tables] = (fn, c_s, timing.times(run, options.kg_repeats), run)
  if prune:
    log(f"pruning scores by gathers {min(modes[False][2]):.3f} s, by "
        f"per-question tables {min(modes[True][2]):.3f} s per rollout")
  best = min(modes, key=lambda m: min(modes[m][2]))
  cfg = dataclasses.replace(cfg, score_tables=best)
  _, compile_s, infer_times, run = modes[best]
  traj = jax.device_get(run())
  steps = walkers * t_max
  figures = {"size": size, "walkers": walkers, "walkers_per_question": per_q,
             "max_steps": t_max, "embed_dim": dim, "hidden": hidden,
             "recurrent": recurrent, "prune": prune, "top_k": cfg.top_k,
             **{k: report[k] for k in ("bandwidth", "nodes_over_bandwidth",
                                       "edges_dropped_share",
                                       "max_out_degree")},
             "concepts": kg.num_concepts, "edges": kg.num_edges,
             "score_tables": best,
             **({"score_tables_infer_speedup": min(modes[False][2]) /
                 min(modes[True][2])} if prune else {}),
             "compile_s": compile_s,
             "infer_s": min(infer_times),
             "infer_median_s": median(infer_times),
             "walker_steps_per_second": steps / min(infer_times),
             "mean_path_length": float(traj.length.mean())}

  def train_time(prune_on: bool):
    tcfg = train_lib.WalkerTrainConfig(
        rollout=dataclasses.replace(cfg, prune=prune_on),
        num_walkers=per_q, reward=weights)
    step_fn = walker_update.make_train_step(policy, optimizer, tcfg)
    batch = GoalBatch(
        question_concepts=jnp.asarray(starts),
        choice_concepts=jnp.asarray(targets)[:, None],
        choice_valid=jnp.ones((b, 1), bool), query=inputs.query,
        gold=jnp.zeros((b,), jnp.int32), example_mask=jnp.ones((b,), bool),
        example_index=jnp.arange(b, dtype=jnp.int32))
    holder = {"state": train_lib.create_train_state(policy, optimizer, 0,
                                                    dim)}
    t0 = time.perf_counter()
    holder["state"], _ = step_fn(holder["state"], graph, batch, rel_dev,
                                 np.float32(0.5))
    jax.block_until_ready(holder["state"])
    first = time.perf_counter() - t0

    def one():
      holder["state"], m = step_fn(holder["state"], graph, batch, rel_dev,
                                   np.float32(0.5))
      jax.block_until_ready(m)
    times = timing.times(one, options.kg_repeats)
    return min(times), median(times), first

  train_s, train_med, train_first = train_time(prune)
  figures.update(train_update_s=train_s, train_update_median_s=train_med,
                 train_compile_and_first_s=train_first,
                 train_walker_steps_per_second=steps / train_s)
  if prune:
    unpruned_s, _, _ = train_time(False)
    figures.update(train_update_unpruned_s=unpruned_s,
                   prune_train_speedup=unpruned_s / train_s)
  params_np = jax.device_get(state.params)
  inputs_np = jax.device_get(inputs)
  u_np = np.asarray(uniforms)
  same = lambda got: float(np.mean(np.all(
      np.asarray(got["edges"]) == traj.edges, axis=-1)))
  if "numpy" in options.kg_baselines:
    out = {}
    times = timing.times(lambda: out.update(kg_numpy_walker.rollout(
        params_np, table, emb, rel_emb, inputs_np, u_np, 0.0, cfg, weights,
        teacher=False)), max(1, options.kg_repeats // 2))
    figures.update(numpy_batched_s=min(times),
                   speedup_vs_numpy_batched=min(times) / figures["infer_s"],
                   numpy_walks_equal_jax=same(out))
  if "torch" in options.kg_baselines:
    try:
      import torch
    except ImportError:
      torch = None
      figures["torch"] = "not installed"
    if torch is not None:
      g = kg_torch_walker.graph_to_torch(table, emb, rel_emb)
      tin = {k: to_torch(np.asarray(getattr(inputs_np, k))) for k in (
          "query", "target", "target_concepts", "starts", "start_mask")}
      tu = torch.from_numpy(np.array(u_np))
      tparams = to_torch(params_np)
      out = {}

      def torch_infer():
        with torch.no_grad():
          out.update(kg_torch_walker.rollout(tparams, g, tin, tu, 0.0, cfg,
                                               weights, teacher=False))
      times = timing.times(torch_infer, max(1, options.kg_repeats // 2))
      figures.update(torch_batched_s=min(times),
                     speedup_vs_torch_batched=min(times) / figures["infer_s"],
                     torch_walks_equal_jax=same(
                         {"edges": out["edges"].numpy()}),
                     torch_threads=torch.get_num_threads())
      tcfg = train_lib.WalkerTrainConfig(rollout=cfg, num_walkers=per_q,
                                         reward=weights)
      tstep = kg_torch_walker.make_train_step(
          to_torch(params_np, requires_grad=True), g, tcfg, 1e-3, 1.0)
      times = timing.times(lambda: tstep(tin, tu, 0.5),
                     max(1, options.kg_repeats // 2))
      figures.update(torch_train_update_s=min(times),
                     train_speedup_vs_torch_batched=min(times) / train_s)
  figures["peak_rss_gb"] = timing.peak_rss_gb()
  stats = getattr(jax.devices()[0], "memory_stats", lambda: None)()
  if stats and "peak_bytes_in_use" in stats:
    figures["device_peak_gb"] = stats["peak_bytes_in_use"] / 2 ** 30
  figures.update(**timing.machine(),
                 timing=f"best (and median) of {options.kg_repeats} after a "
                 "warm-up; baselines best of half as many")
  for k, v in figures.items():
    log(f"{k:<32} {v:,.4f}" if isinstance(v, float) else f"{k:<32} {v}")
  return figures
