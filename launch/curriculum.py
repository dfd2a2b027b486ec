r"""GraphDancer's curriculum against uniform sampling, one command:

  python launch/curriculum.py --config=configs/csqa.py \
      --data_dir=DATA --workdir=runs/curriculum --seeds=0,1,2

Trains the walker twice per seed with the same budget — uniform epochs and
the easy-to-hard sampler (``curriculum.*`` of the config) — evaluating the
greedy path hit rate on ``eval.split`` every ``--eval_every`` updates, then
compares learning speed (updates to reach the target hit rate, default 95%
of the lowest final one) and final hit rate, mean ± std over seeds:
``<workdir>/comparison.md``, ``learning_curves.png`` and, as the last line,
one JSON object. Finished runs are reused (re-running resumes).
"""

import functools
import json
import os

from absl import flags, logging
from ml_collections import config_flags

from racer_jax import entry_point
from racer_jax.eval import learning_curves

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs",
                           "demo.py"), "Configuration file.")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Output directory.",
                               required=True)
_SEEDS = flags.DEFINE_list("seeds", ["0", "1", "2"], "Training seeds.")
_EVAL_EVERY = flags.DEFINE_integer("eval_every", 150, "Updates between "
                                   "evaluations of the hit rate.")
_TARGET = flags.DEFINE_float("target", None, "Hit rate to reach (default: "
                             "95% of the lowest final).")
_PROGRESS = flags.DEFINE_bool("progress", True, "Show progress bars.")


def main():
  logging.set_verbosity(logging.WARNING)
  result = learning_curves.curriculum_comparison(
      _CONFIG.value, _DATA_DIR.value, _WORKDIR.value,
      [int(s) for s in _SEEDS.value], eval_every=_EVAL_EVERY.value,
      target=_TARGET.value, progress=_PROGRESS.value,
      log=functools.partial(print, flush=True))
  with open(os.path.join(_WORKDIR.value, "comparison.md"),
            encoding="utf-8") as f:
    print(f.read())
  print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
  entry_point.run(main)
