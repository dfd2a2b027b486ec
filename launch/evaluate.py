r"""Evaluates a trained run from its checkpoint
(:mod:`racer_jax.train.evaluate_run`).

  python launch/evaluate.py --workdir=runs/demo/walker
  python launch/evaluate.py --workdir=runs/csqa --data_dir=DATA \
      --split=dev --step=3000
  python launch/evaluate.py --workdir=runs/demo/answer --answer_only

Uses the config saved in the workdir unless ``--config`` is given; the
run's kind (walker, HyGRL, refiner, answer) picks the evaluation, and a flag
that does not apply to it is refused. Prints the figures; the last line is
one JSON object (the keys are listed in each evaluation's module: walker
``path_hit_rate``...; HyGRL ``recall_policy``...; refiner
``gold_in_topk_refiner``...; answer runs ``accuracy``, ``critic_calibration``,
``memory_source``, ``memory_eval_label_updates``, ``llm``...).
"""

import json

from absl import flags, logging
from ml_collections import config_flags

from racer_jax import entry_point
from racer_jax.train import evaluate_run

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Configuration file (default: <workdir>/config.json).")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Run directory.",
                               required=True)
_PROGRESS = flags.DEFINE_bool("progress", True, "Show progress bars.")
for _option in evaluate_run.OPTIONS:
  getattr(flags, f"DEFINE_{_option.type}")(_option.name, _option.default,
                                           _option.help)


def main():
  logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  options = {o.name: flags.FLAGS[o.name].value for o in evaluate_run.OPTIONS}
  config = (evaluate_run.load_run_config(_WORKDIR.value, _CONFIG.value)
            if not options["compare"] else _CONFIG.value)
  kind = evaluate_run.run_kind(config, options)
  evaluate_run.refuse_inapplicable(
      kind, {o.name for o in evaluate_run.OPTIONS
             if flags.FLAGS[o.name].present})
  figures = evaluate_run.evaluate_run(config, _DATA_DIR.value, _WORKDIR.value,
                                      options, progress=_PROGRESS.value)
  print(evaluate_run.figures_text(figures, kind, _WORKDIR.value))
  print(json.dumps(figures, sort_keys=True))
  evaluate_run.check_required(figures, options)


if __name__ == "__main__":
  entry_point.run(main)
