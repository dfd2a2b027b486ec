r"""Paired comparison of two runs' predictions on the same questions.

  python launch/compare.py \
      --a=runs/csqa_plain/eval/dev.answer_only/questions.jsonl \
      --b=runs/csqa_answer/eval/dev.answer_only/questions.jsonl

Prints B's accuracy minus A's with a paired bootstrap 95% interval and
McNemar's exact p-value (``racer_jax/eval/paired.py``); the last line is one
JSON object: ``accuracy_a``, ``accuracy_b``, ``difference``,
``difference_ci95``, ``mcnemar_p``, ... Accepts any evaluation's
``eval/<name>/questions.jsonl`` with ``correct`` or ``gold`` and
``prediction`` (the answer model's, the agents' ``full.seed<k>.jsonl``, the
refiner's choice head; ``--field=gold_in_topk`` compares whether the
refiner's kept paths hold a gold-supporting one), and the answer stage's
``*.answer.jsonl``.

Comma-separated files on a side are runs of one setting (seeds): the
comparison is then of their mean accuracies, per question averaged over the
runs, with a paired permutation p-value (``permutation_p``) and the per-run
accuracies (``accuracy_a_runs``, ``accuracy_b_runs``).
"""

import json

from absl import flags

from racer_jax import entry_point
from racer_jax.eval import paired

_A = flags.DEFINE_list("a", None, "Predictions of the reference run (or "
                       "runs: seeds of one setting).", required=True)
_B = flags.DEFINE_list("b", None, "Predictions of the run(s) compared to "
                       "it.", required=True)
_SEED = flags.DEFINE_integer("seed", 0, "Bootstrap seed.")
_RESAMPLES = flags.DEFINE_integer("resamples", 10_000, "Bootstrap resamples.")
_FIELD = flags.DEFINE_string(
    "field", "correct", "The per-question true/false compared: correct "
    "(or gold and prediction), or another, e.g. gold_in_topk of the "
    "refiner's eval/<split>_step<N>.refiner/questions.jsonl.")


def main():
  figures, text = paired.compare_files(_A.value, _B.value, seed=_SEED.value,
                                       resamples=_RESAMPLES.value,
                                       field=_FIELD.value)
  print(text)
  print(json.dumps(figures))


if __name__ == "__main__":
  entry_point.run(main)
