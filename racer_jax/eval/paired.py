"""Is one model really better than another on the same questions?

Two accuracies measured on the same N questions differ by chance by about
``sqrt(2 p (1 - p) / N)`` (~2.4 points at N = 834, p = 0.5), so a gain is
reported with its paired statistics:

- a paired bootstrap (``scipy.stats.bootstrap``, percentile method):
  resample the questions with replacement and take the 2.5 / 97.5
  percentiles of the accuracy difference (both models see the same
  resampled questions, so the shared difficulty of a question cancels);
- McNemar's exact test: under "no difference", each question that exactly
  one model gets right is equally likely to be either model's, so the count
  of B-only wins among the discordant questions is Binomial(n, 1/2)
  (``scipy.stats.binomtest``, two-sided).

With several runs per side (seeds of one setting against seeds of the other,
:func:`seeds_comparison`), each question's correctness is averaged over a
side's runs; the interval is the same paired bootstrap over questions of
those averages and the p-value a paired sign-flip permutation test
(``scipy.stats.permutation_test``: under "no difference" each question's
two averages are exchangeable). The per-run accuracies show the spread
between seeds, which no test on one set of questions can.

Predictions are the JSONL files the runs write (one object per question with
``id``, ``gold`` and ``prediction``, or ``correct``): ``evaluate.py
--answer_only``'s ``eval/<split>.answer_only/member<i>.answer.jsonl`` (and
the cross-encoder stage's ``eval/<split>_step<N>.answer.jsonl``), and the
agents evaluation's ``eval/<split>/full.seed<s>.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy import stats

from racer_jax.errors import DataError


def load_correct(path, field: str = "correct") -> dict[str, bool]:
  """``{question id: answered correctly}`` from a predictions file; an
  unlabeled question (gold ``-1`` / ``None``) is skipped. ``field``: another
  per-question boolean to compare instead (e.g. a refiner's
  ``gold_in_topk``), required on every line."""
  path = Path(path)
  out: dict[str, bool] = {}
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError as e:
        raise DataError(path, n, None, f"not JSON: {e}") from e
      qid = record.get("id")
      if not isinstance(qid, str):
        raise DataError(path, n, "id", f"missing or not a string: {qid!r}")
      if qid in out:
        raise DataError(path, n, "id", f"{qid!r} appears twice")
      if field != "correct" and not isinstance(record.get(field), bool):
        raise DataError(path, n, field, "missing or not true/false: "
                        f"{record.get(field)!r}")
      if field in record:
        if record[field] is None:
          continue
        out[qid] = bool(record[field])
        continue
      gold, prediction = record.get("gold"), record.get("prediction")
      if gold is None or gold == -1:
        continue
      if not isinstance(prediction, int) or not isinstance(gold, int):
        raise DataError(path, n, "prediction", "needs integer gold and "
                        f"prediction (or a correct field), got {gold!r}, "
                        f"{prediction!r}")
      out[qid] = prediction == gold
  return out


def align(a: dict[str, bool], b: dict[str, bool], path_a="a", path_b="b"):
  """bool arrays [N] over the questions both files answer; every question of
  one file must be in the other (else the comparison is not paired)."""
  only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
  if only_a or only_b:
    raise DataError(path_b if only_a else path_a, None, "id",
                    f"the files answer different questions: {len(only_a)} "
                    f"only in {path_a} (e.g. {only_a[:2]}), {len(only_b)} "
                    f"only in {path_b} (e.g. {only_b[:2]})")
  ids = sorted(a)
  return (np.array([a[i] for i in ids], bool),
          np.array([b[i] for i in ids], bool))


def paired_comparison(correct_a, correct_b, *, seed: int = 0,
                      resamples: int = 10_000) -> dict:
  """Accuracy of B minus A on the same questions, with its paired bootstrap
  95% interval and McNemar's exact p-value.

  Args:
    correct_a, correct_b: bool [N], question i answered right by A / B.
  """
  a = np.asarray(correct_a, bool)
  b = np.asarray(correct_b, bool)
  if a.shape != b.shape or a.ndim != 1 or a.size < 2:
    raise ValueError(f"a paired comparison needs the same N >= 2 questions "
                     f"on both sides, got {a.shape} and {b.shape}")
  n = a.size
  diff = b.astype(np.float64) - a.astype(np.float64)      # [N] in {-1, 0, 1}
  interval = stats.bootstrap(
      (diff,), np.mean, n_resamples=resamples, batch=1000,
      confidence_level=0.95, method="percentile",
      random_state=np.random.default_rng(seed)).confidence_interval
  low, high = interval.low, interval.high
  b_only, a_only = int(np.sum(b & ~a)), int(np.sum(a & ~b))
  discordant = a_only + b_only
  p = (stats.binomtest(b_only, discordant, 0.5).pvalue if discordant
       else 1.0)
  return {"questions": n, "accuracy_a": float(a.mean()),
          "accuracy_b": float(b.mean()), "difference": float(diff.mean()),
          "difference_ci95": [float(low), float(high)],
          "a_only_correct": a_only, "b_only_correct": b_only,
          "mcnemar_p": float(p), "bootstrap_resamples": resamples,
          "seed": seed}


def seeds_comparison(correct_a, correct_b, *, seed: int = 0,
                     resamples: int = 10_000) -> dict:
  """Mean accuracy of B's runs minus A's on the same questions.

  Args:
    correct_a: bool [R_a, N], question i answered right by A's run r
      (seeds of one setting); correct_b: bool [R_b, N] likewise.

  Returns:
    the per-run accuracies, the difference of the means, its paired
    bootstrap 95% interval over questions and the permutation p-value.
  """
  a = np.asarray(correct_a, bool)
  b = np.asarray(correct_b, bool)
  if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or not a.size:
    raise ValueError(f"need bool [runs, N] arrays over the same N > 0 "
                     f"questions, got {a.shape} and {b.shape}")
  mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)           # [N]
  diff = mean_b - mean_a
  rng = np.random.default_rng(seed)
  interval = stats.bootstrap(
      (diff,), np.mean, n_resamples=resamples, batch=1000,
      confidence_level=0.95, method="percentile",
      random_state=rng).confidence_interval
  test = stats.permutation_test(
      (mean_a, mean_b), lambda x, y, axis: np.mean(y - x, axis=axis),
      vectorized=True,
      permutation_type="samples", n_resamples=resamples, random_state=rng)
  return {"questions": int(a.shape[1]), "runs_a": int(a.shape[0]),
          "runs_b": int(b.shape[0]),
          "accuracy_a_runs": [float(x) for x in a.mean(axis=1)],
          "accuracy_b_runs": [float(x) for x in b.mean(axis=1)],
          "accuracy_a": float(mean_a.mean()),
          "accuracy_b": float(mean_b.mean()),
          "difference": float(diff.mean()),
          "difference_ci95": [float(interval.low), float(interval.high)],
          "permutation_p": float(test.pvalue),
          "bootstrap_resamples": resamples, "seed": seed}


def compare_files(files_a: list[str], files_b: list[str], *, seed: int = 0,
                  resamples: int = 10_000,
                  field: str = "correct") -> tuple[dict, str]:
  """``(figures, text)`` comparing the prediction files ``files_b`` with
  ``files_a`` on the questions they share (each file one run): McNemar
  and a paired bootstrap for one run against one, else a paired
  permutation test over the runs as units. ``field``: see
  :func:`load_correct`."""
  files = list(files_a) + list(files_b)
  loaded = [load_correct(f, field) for f in files]
  rows = [align(loaded[0], x, files[0], f)[1] for x, f in zip(loaded, files)]
  runs_a, runs_b = rows[:len(files_a)], rows[len(files_a):]
  name_a, name_b = ",".join(files_a), ",".join(files_b)
  lines = []
  if len(runs_a) == len(runs_b) == 1:
    result = paired_comparison(runs_a[0], runs_b[0], seed=seed,
                               resamples=resamples)
    test = (f"McNemar p = {result['mcnemar_p']:.3g} "
            f"({result['b_only_correct']} B-only, "
            f"{result['a_only_correct']} A-only right)")
  else:
    result = seeds_comparison(runs_a, runs_b, seed=seed,
                              resamples=resamples)
    runs = lambda accs: ", ".join(f"{x:.4f}" for x in accs)
    lines += [f"A runs: {runs(result['accuracy_a_runs'])}",
              f"B runs: {runs(result['accuracy_b_runs'])}"]
    test = f"permutation p = {result['permutation_p']:.3g}"
  low, high = result["difference_ci95"]
  lines += [f"A {name_a}: {result['accuracy_a']:.4f}",
            f"B {name_b}: {result['accuracy_b']:.4f}",
            f"B - A = {result['difference']:+.4f} over {result['questions']} "
            f"questions, 95% paired bootstrap [{low:+.4f}, {high:+.4f}], "
            f"{test}"]
  return {"a": name_a, "b": name_b, **result}, "\n".join(lines)

