"""The ROC AUC the scoring critic's calibration reports, against the
pairwise definition."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from racer_jax.eval.calibration import roc_auc


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=2,
                max_size=30))
def test_auc_is_the_share_of_pairs_a_positive_wins(rows):
  scores = np.array([s for s, _ in rows], float)
  positive = np.array([p for _, p in rows], bool)
  if positive.all() or not positive.any():
    assert roc_auc(scores, positive) is None
    return
  pairs = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in
           itertools.product(scores[positive], scores[~positive])]
  assert np.isclose(roc_auc(scores, positive), np.mean(pairs))
