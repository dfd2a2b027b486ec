r"""Paired comparison of two runs' predictions on the same questions.

  python launch/compare.py \
      --a=runs/csqa_plain/eval/dev_step609.answer.jsonl \
      --b=runs/csqa_answer/eval/dev_step609.answer.jsonl

Prints B's accuracy minus A's with a paired bootstrap 95% interval and
McNemar's exact p-value (``racer_jax/eval/paired.py``); the last line is one
JSON object: ``accuracy_a``, ``accuracy_b``, ``difference``,
``difference_ci95``, ``mcnemar_p``, ... Accepts the answer stage's
``*.answer.jsonl`` and the agents evaluation's ``*.agents.jsonl``.

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


def main():
  files = _A.value + _B.value
  loaded = [paired.load_correct(f) for f in files]
  rows = [paired.align(loaded[0], x, files[0], f)[1]
          for x, f in zip(loaded, files)]
  runs_a, runs_b = rows[:len(_A.value)], rows[len(_A.value):]
  name_a, name_b = ",".join(_A.value), ",".join(_B.value)
  if len(runs_a) == len(runs_b) == 1:
    result = paired.paired_comparison(runs_a[0], runs_b[0],
                                      seed=_SEED.value,
                                      resamples=_RESAMPLES.value)
    test = (f"McNemar p = {result['mcnemar_p']:.3g} "
            f"({result['b_only_correct']} B-only, "
            f"{result['a_only_correct']} A-only right)")
  else:
    result = paired.seeds_comparison(runs_a, runs_b, seed=_SEED.value,
                                     resamples=_RESAMPLES.value)
    runs = lambda accs: ", ".join(f"{x:.4f}" for x in accs)
    print(f"A runs: {runs(result['accuracy_a_runs'])}\n"
          f"B runs: {runs(result['accuracy_b_runs'])}")
    test = f"permutation p = {result['permutation_p']:.3g}"
  low, high = result["difference_ci95"]
  print(f"A {name_a}: {result['accuracy_a']:.4f}\n"
        f"B {name_b}: {result['accuracy_b']:.4f}\n"
        f"B - A = {result['difference']:+.4f} over {result['questions']} "
        f"questions, 95% paired bootstrap [{low:+.4f}, {high:+.4f}], {test}")
  print(json.dumps({"a": name_a, "b": name_b, **result}))


if __name__ == "__main__":
  entry_point.run(main)
