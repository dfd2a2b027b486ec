"""Paired comparison of two runs: bootstrap interval, McNemar, file checks."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from racer_jax.errors import DataError
from racer_jax.eval import paired
from tests.conftest import REPO


def test_mcnemar_matches_the_binomial_by_hand():
  # 3 questions only B gets right, 0 only A: two-sided exact p = 2 * 1/8.
  a = np.array([1, 1, 0, 0, 0, 0], bool)
  b = np.array([1, 1, 1, 1, 1, 0], bool)
  out = paired.paired_comparison(a, b, resamples=2000)
  assert (out["b_only_correct"], out["a_only_correct"]) == (3, 0)
  assert out["mcnemar_p"] == pytest.approx(2 * 0.5 ** 3)
  assert out["difference"] == pytest.approx(0.5)
  # 7 vs 3 discordant questions.
  a = np.array([1] * 3 + [0] * 7 + [1] * 5, bool)
  b = np.array([0] * 3 + [1] * 7 + [1] * 5, bool)
  p = 2 * sum(math.comb(10, k) for k in range(0, 4)) / 2 ** 10
  assert paired.paired_comparison(a, b)["mcnemar_p"] == pytest.approx(p)


def test_bootstrap_interval_covers_the_truth_and_shrinks_with_n():
  rng = np.random.default_rng(0)
  widths, covered = [], 0
  for trial in range(20):
    n = 400 if trial < 10 else 3600
    a = rng.random(n) < 0.45
    b = np.where(rng.random(n) < 0.8, a, rng.random(n) < 0.55)  # +0.02
    out = paired.paired_comparison(a, b, seed=trial, resamples=2000)
    low, high = out["difference_ci95"]
    covered += low <= 0.02 <= high
    widths.append(high - low)
  assert covered >= 17  # nominal 95%
  assert np.mean(widths[10:]) < 0.45 * np.mean(widths[:10])  # ~ 1/sqrt(9)
  same = paired.paired_comparison(a, a)
  assert same["difference_ci95"] == [0.0, 0.0] and same["mcnemar_p"] == 1.0
  # Same seed, same interval.
  assert paired.paired_comparison(a, b, seed=3) == \
      paired.paired_comparison(a, b, seed=3)


def _write(path, rows):
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  return path


def test_files_are_paired_by_id_and_bad_lines_named(tmp_path):
  a = _write(tmp_path / "a.jsonl", [
      {"id": "q1", "gold": 0, "prediction": 0},
      {"id": "q2", "gold": 1, "prediction": 0},
      {"id": "q3", "gold": -1, "prediction": 2}])          # unlabeled: skipped
  b = _write(tmp_path / "b.jsonl", [
      {"id": "q2", "correct": True}, {"id": "q1", "correct": False}])
  ca, cb = paired.align(paired.load_correct(a), paired.load_correct(b))
  assert ca.tolist() == [True, False] and cb.tolist() == [False, True]
  c = _write(tmp_path / "c.jsonl", [{"id": "q1", "correct": True}])
  with pytest.raises(DataError, match="different questions"):
    paired.align(paired.load_correct(a), paired.load_correct(c), "a", "c")
  bad = tmp_path / "bad.jsonl"
  bad.write_text('{"id": "q1", "correct": true}\n{"id": "q1", "corr')
  with pytest.raises(DataError, match=r"bad.jsonl:2: not JSON"):
    paired.load_correct(bad)
  twice = _write(tmp_path / "twice.jsonl", [{"id": "q1", "correct": True}] * 2)
  with pytest.raises(DataError, match=r"twice.jsonl:2: field 'id'"):
    paired.load_correct(twice)


def test_compare_cli_ends_with_json(tmp_path):
  rows = [{"id": f"q{i}", "gold": i % 5, "prediction": (i * 7) % 5}
          for i in range(60)]
  a = _write(tmp_path / "a.jsonl", rows)
  b = _write(tmp_path / "b.jsonl", [dict(r, prediction=r["gold"])
                                    if i % 2 else r
                                    for i, r in enumerate(rows)])
  out = subprocess.run([sys.executable, str(REPO / "launch/compare.py"),
                        f"--a={a}", f"--b={b}", "--resamples=500"],
                       capture_output=True, text=True, check=True)
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  correct_a = np.mean([r["gold"] == r["prediction"] for r in rows])
  assert figures["accuracy_a"] == pytest.approx(correct_a)
  assert figures["difference"] > 0 and figures["mcnemar_p"] < 0.01
