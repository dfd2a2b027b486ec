r"""Speed and memory benchmarks. Each prints a table, then one JSON line.

  python launch/benchmark.py prepare --data_dir=../shared/data
  python launch/benchmark.py rollout [--data_dir=../shared/data]
  python launch/benchmark.py hygrl [--data_dir=../shared/data]
  python launch/benchmark.py kg_rollout --size=cn100k|multihopkg|fullsize

``prepare`` (``launch/bench_prepare.py``): CN-100K ingest, grounding and
subgraph extraction for all of CommonsenseQA, and a generated graph of
full-ConceptNet size, against plain-Python references measured in the same
run. ``rollout`` (``launch/bench_rollout.py``): walker-steps per second of
the jitted rollout and training update against a plain-Python loop, a NumPy
loop batched over walkers and eager PyTorch, for 1 ... 4096 walkers.
``hygrl`` (``launch/bench_hygrl.py``): questions per second of HyGRL's
jitted greedy beam search against its plain-Python reference, and of one
jitted RL update (SCST + margin ranking). ``kg_rollout``
(``launch/bench_kg_rollout.py``): the whole-graph walker's walker-steps per
second in inference and training, against NumPy and eager-PyTorch walks
batched per hop, on CN-100K, a MultiHopKG-style graph or a full-size one.
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_hygrl  # noqa: E402  (defines its flags)
import bench_kg_rollout  # noqa: E402  (defines its flags)
import bench_prepare  # noqa: E402  (defines its flags)
import bench_rollout  # noqa: E402  (defines its flags)
from racer_jax.data import datasets  # noqa: E402

_DATA_DIR = flags.DEFINE_string("data_dir", None,
                                "Data directory (default: $RACER_DATA_DIR).")


def main(argv):
  kinds = ("prepare", "rollout", "hygrl", "kg_rollout")
  if len(argv) != 2 or argv[1] not in kinds:
    raise app.UsageError(f"usage: benchmark.py {'|'.join(kinds)} [--flags]")
  data_dir = datasets.resolve_data_dir(_DATA_DIR.value)
  if argv[1] == "kg_rollout":
    figures = bench_kg_rollout.bench_kg_rollout(
        data_dir if data_dir and data_dir.is_dir() else None)
    print(json.dumps(_rounded(figures)))
    return
  if argv[1] == "hygrl":  # --prep_dir is the rollout benchmark's flag
    with tempfile.TemporaryDirectory() as work_dir:
      figures = bench_hygrl.bench_hygrl(
          data_dir if data_dir and data_dir.is_dir() else None,
          bench_rollout._PREP_DIR.value or work_dir)
    print(json.dumps(_rounded(figures)))
    return
  if argv[1] == "rollout":
    with tempfile.TemporaryDirectory() as work_dir:
      figures = bench_rollout.bench_rollout(
          data_dir if data_dir and data_dir.is_dir() else None,
          bench_rollout._PREP_DIR.value or work_dir)
    print(json.dumps(_rounded(figures)))
    return
  if data_dir is None or not data_dir.is_dir():
    raise app.UsageError("the prepare benchmark needs --data_dir (or "
                         "RACER_DATA_DIR) with conceptnet/cn100k and csqa/")
  with tempfile.TemporaryDirectory() as work_dir:
    figures = bench_prepare.bench_prepare(data_dir, work_dir)
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
