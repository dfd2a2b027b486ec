r"""Paired comparison of two runs' predictions on the same questions.

  python launch/compare.py \
      --a=runs/csqa_plain/eval/dev_step609.answer.jsonl \
      --b=runs/csqa_answer/eval/dev_step609.answer.jsonl

Prints B's accuracy minus A's with a paired bootstrap 95% interval and
McNemar's exact p-value (``racer_jax/eval/paired.py``); the last line is one
JSON object: ``accuracy_a``, ``accuracy_b``, ``difference``,
``difference_ci95``, ``mcnemar_p``, ... Accepts the answer stage's
``*.answer.jsonl`` and the agents evaluation's ``*.agents.jsonl``.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags  # noqa: E402

from racer_jax.eval import paired  # noqa: E402

_A = flags.DEFINE_string("a", None, "Predictions of the reference run.",
                         required=True)
_B = flags.DEFINE_string("b", None, "Predictions of the run compared to it.",
                         required=True)
_SEED = flags.DEFINE_integer("seed", 0, "Bootstrap seed.")
_RESAMPLES = flags.DEFINE_integer("resamples", 10_000, "Bootstrap resamples.")


def main(argv):
  del argv
  a, b = paired.load_correct(_A.value), paired.load_correct(_B.value)
  result = paired.paired_comparison(
      *paired.align(a, b, _A.value, _B.value), seed=_SEED.value,
      resamples=_RESAMPLES.value)
  low, high = result["difference_ci95"]
  print(f"A {_A.value}: {result['accuracy_a']:.4f}\n"
        f"B {_B.value}: {result['accuracy_b']:.4f}\n"
        f"B - A = {result['difference']:+.4f} over {result['questions']} "
        f"questions, 95% paired bootstrap [{low:+.4f}, {high:+.4f}], "
        f"McNemar p = {result['mcnemar_p']:.3g} "
        f"({result['b_only_correct']} B-only, {result['a_only_correct']} "
        "A-only right)")
  print(json.dumps({"a": _A.value, "b": _B.value, **result}))


if __name__ == "__main__":
  app.run(main)
