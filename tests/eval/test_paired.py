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


def test_another_field_is_compared_and_required(tmp_path):
  """A refiner's rows: ``gold_in_topk`` compared instead of ``correct``."""
  a = _write(tmp_path / "a.jsonl", [
      {"id": "q1", "gold": 0, "gold_in_topk": True, "correct": False},
      {"id": "q2", "gold": 1, "gold_in_topk": False, "correct": True}])
  assert paired.load_correct(a, "gold_in_topk") == {"q1": True, "q2": False}
  assert paired.load_correct(a) == {"q1": False, "q2": True}
  b = _write(tmp_path / "b.jsonl", [{"id": "q1", "gold": 0, "correct": True}])
  with pytest.raises(DataError, match=r"b.jsonl:1: field 'gold_in_topk'"):
    paired.load_correct(b, "gold_in_topk")


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


def test_seeds_comparison_averages_runs_per_question():
  rng = np.random.default_rng(0)
  n = 400
  a = rng.random((3, n)) < 0.5
  # One run per side: the same difference and interval as the pairwise
  # comparison, and a permutation p-value close to McNemar's.
  one = paired.seeds_comparison(a[:1], a[1:2], seed=3, resamples=4000)
  pair = paired.paired_comparison(a[0], a[1], seed=3, resamples=4000)
  assert one["difference"] == pytest.approx(pair["difference"])
  assert one["difference_ci95"] == pytest.approx(pair["difference_ci95"])
  assert one["permutation_p"] == pytest.approx(pair["mcnemar_p"], abs=0.05)
  # The same runs on both sides: no difference at all.
  same = paired.seeds_comparison(a, a, resamples=2000)
  assert same["difference"] == 0 and same["permutation_p"] == 1.0
  # B right on 10% more questions in every run: found, per run and pooled.
  better = a | (rng.random((3, n)) < 0.2)
  got = paired.seeds_comparison(a, better, resamples=2000)
  assert got["accuracy_a_runs"] == pytest.approx(list(a.mean(axis=1)))
  assert got["difference"] == pytest.approx(better.mean() - a.mean())
  low, high = got["difference_ci95"]
  assert 0 < low < got["difference"] < high and got["permutation_p"] < 0.001
  with pytest.raises(ValueError, match="same N"):
    paired.seeds_comparison(a, better[:, :10])


def test_compare_cli_with_runs_per_side(tmp_path):
  rows = [{"id": f"q{i}", "gold": i % 5, "prediction": (i * 7) % 5}
          for i in range(60)]
  a = [_write(tmp_path / f"a{s}.jsonl", rows) for s in range(2)]
  b = [_write(tmp_path / f"b{s}.jsonl", [
      dict(r, prediction=r["gold"]) if (i + s) % 2 else r
      for i, r in enumerate(rows)]) for s in range(3)]
  out = subprocess.run([sys.executable, str(REPO / "launch/compare.py"),
                        f"--a={','.join(map(str, a))}",
                        f"--b={','.join(map(str, b))}", "--resamples=500"],
                       capture_output=True, text=True, check=True)
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  assert figures["runs_a"] == 2 and figures["runs_b"] == 3
  assert len(figures["accuracy_b_runs"]) == 3
  assert figures["difference"] > 0 and figures["permutation_p"] < 0.01
