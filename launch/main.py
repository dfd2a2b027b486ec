r"""The main job: every stage of RACER on one config, end to end
(:mod:`racer_jax.train.main_job`).

  python launch/main.py --config=configs/demo.py --workdir=runs/demo
  python launch/main.py --config=configs/csqa.py --data_dir=DATA \
      --workdir=runs/csqa --config.answer.model=frozen_head

Walker, refiner and answer model each train into their own folder under
``--workdir`` (a finished stage is skipped, an unfinished one resumes); the
four agents are evaluated on ``eval.split`` and one question is answered
with its reasoning paths drawn. The last line of output is one JSON object
with the evaluation's figures.
"""

import functools
import json
import os

from absl import flags, logging
from ml_collections import config_flags

from racer_jax import entry_point
from racer_jax.train import main_job

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs",
                           "demo.py"), "Configuration file.")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory.",
                               required=True)
_QUESTION = flags.DEFINE_string("question", None, "A question to answer at "
                                "the end (default: the eval split's first).")
_CHOICES = flags.DEFINE_list("choices", None, "Its choices.")
_PLOT = flags.DEFINE_string("plot", None, "Draw the question's reasoning "
                            "paths to this PNG (default: "
                            "<workdir>/reasoning_paths.png).")
_ABLATIONS = flags.DEFINE_bool(
    "ablations", False, "Also train the runs the ablation table needs "
    "(walkers with p_teacher = 0 and without pruning, their refiners, a "
    "HyGRL run; same config, budget and seed) and evaluate every ablation.")
_PROGRESS = flags.DEFINE_bool("progress", True, "Show progress bars.")


def main():
  logging.set_verbosity(logging.WARNING)
  figures = main_job.run_main_job(
      _CONFIG.value, _DATA_DIR.value, _WORKDIR.value,
      question=_QUESTION.value, choices=_CHOICES.value, plot=_PLOT.value,
      ablations=_ABLATIONS.value, progress=_PROGRESS.value,
      log=functools.partial(print, flush=True))
  print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
  entry_point.run(main)
