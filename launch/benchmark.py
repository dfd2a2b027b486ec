r"""Speed and memory benchmarks (``launch/bench/``, outside the installed
package). Each prints a table, then one JSON line.

  python launch/benchmark.py prepare --data_dir=DATA
  python launch/benchmark.py hygrl [--data_dir=DATA]
  python launch/benchmark.py kg_rollout --size=cn100k|multihopkg|fullsize
  python launch/benchmark.py lm_score [--lm_model=FILE.gguf]
  python launch/benchmark.py explorer_ppo [--explorer_batch=128]

``prepare``: CN-100K ingest, grounding and subgraph extraction for all of
CommonsenseQA, and a generated graph of full-ConceptNet size, against
plain-Python references measured in the same run. ``hygrl``: questions per second of HyGRL's jitted greedy beam
search against its plain-Python reference, and of one jitted RL update.
``kg_rollout``: the walker's walker-steps per second in inference and
training on the whole graph, against NumPy and eager-PyTorch walks
batched per hop. ``lm_score``: the JAX LM scorer against llama.cpp on one GGUF.
``explorer_ppo``: GraphDancer's explorer: sampled tokens per second and
the seconds of one PPO update at a batch (absolute figures: no reference
trains an LM policy here). A flag of another benchmark is refused.
"""

import json
import tempfile

from absl import flags

from racer_jax import entry_point
from bench import (explorer_bench, hygrl_bench, kg_rollout_bench,
                   lm_score_bench, prepare_bench, timing)
from racer_jax.data import datasets

_DATA_DIR = flags.DEFINE_string("data_dir", None,
                                "Data directory (default: $RACER_DATA_DIR).")
_PREP_DIR = flags.DEFINE_string("prep_dir", None, "hygrl: prepared-data "
                                "cache (default: a temporary folder).")
OPTIONS = {"prepare": prepare_bench.PrepareOptions,
           "hygrl": hygrl_bench.HygrlOptions,
           "kg_rollout": kg_rollout_bench.KgRolloutOptions,
           "lm_score": lm_score_bench.LmScoreOptions,
           "explorer_ppo": explorer_bench.ExplorerOptions}
_READ = {kind: entry_point.define_flags(cls) for kind, cls in OPTIONS.items()}


def main(kind):
  for other, cls in OPTIONS.items():
    if other != kind and entry_point.set_flags(cls):
      entry_point.fail(f"--{entry_point.set_flags(cls)[0]} is a flag of the "
                       f"{other} benchmark, not of {kind}")
  if _PREP_DIR.present and kind != "hygrl":
    entry_point.fail(f"--prep_dir does not apply to the {kind} benchmark")
  options = _READ[kind]()
  data_dir = datasets.resolve_data_dir(_DATA_DIR.value)
  data_dir = data_dir if data_dir and data_dir.is_dir() else None
  with tempfile.TemporaryDirectory() as work_dir:
    if kind == "explorer_ppo":
      figures = explorer_bench.bench_explorer(options)
    elif kind == "lm_score":
      figures = lm_score_bench.bench_lm_score(data_dir, options)
    elif kind == "kg_rollout":
      figures = kg_rollout_bench.bench_kg_rollout(data_dir, options)
    elif kind == "hygrl":
      figures = hygrl_bench.bench_hygrl(data_dir, _PREP_DIR.value or work_dir,
                                        options)
    else:
      if data_dir is None:
        entry_point.fail("the prepare benchmark needs --data_dir (or "
                         "RACER_DATA_DIR) with conceptnet/cn100k and csqa/")
      figures = prepare_bench.bench_prepare(data_dir, work_dir, options)
      width = max(map(len, figures))
      for key, value in figures.items():
        shown = f"{value:,.3f}" if isinstance(value, float) else f"{value:,}"
        print(f"{key:<{width}}  {shown}")
  print(json.dumps(timing.rounded(figures)))


if __name__ == "__main__":
  entry_point.run(main, commands=tuple(OPTIONS))
