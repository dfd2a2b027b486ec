"""The frozen-head answer model's walker-evidence inputs: the features of
:func:`choice_head.evidence_features` by hand on one question, and the head
reading them (its input grows, its output still masks padded choices)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import test as test_config
from racer_jax.answer import choice_head
from racer_jax.runs.config_checks import ConfigError, check_config


def _ev(walks, reached, distinct, lp, score):
  return {"walks": walks, "reached": reached, "distinct": distinct,
          "best_log_prob": lp, "best_score": score}


def test_evidence_features_by_hand():
  question = [_ev(8, 4, 3, -2.0, 1.0),      # reached most often
              _ev(8, 2, 2, -1.0, 2.0),      # better path, higher score
              _ev(8, 0, 1, None, 0.0),      # a path, never reached
              _ev(0, 0, 0, None, None)]     # nothing walked toward it
  f = choice_head.evidence_features([question], num_choices=5)
  assert f.shape == (1, 5, choice_head.EVIDENCE_DIM)
  reach = np.array([0.5, 0.25, 0.0, 0.0])
  np.testing.assert_allclose(f[0, :4, 0], reach)
  np.testing.assert_array_equal(f[0, :4, 1], [1, 1, 0, 0])
  lp = np.array([0.8, 0.9, 0.0, 0.0])  # 1 - lp / -10
  np.testing.assert_allclose(f[0, :4, 2], lp, rtol=1e-6)
  np.testing.assert_allclose(f[0, :4, 3], reach - 0.5)
  np.testing.assert_array_equal(f[0, :4, 4], [1, 0, 0, 0])
  np.testing.assert_allclose(f[0, :4, 5], lp - 0.9, atol=1e-6)
  np.testing.assert_array_equal(f[0, :4, 6], [1, 1, 1, 0])
  soft = np.exp([1.0, 2.0, 0.0]) / np.exp([1.0, 2.0, 0.0]).sum()
  np.testing.assert_allclose(f[0, :3, 7], soft, rtol=1e-6)
  assert f[0, 3, 7] == 0
  np.testing.assert_allclose(f[0, :4, 8], [3 / 8, 2 / 8, 1 / 8, 0])
  assert not f[0, 4].any()  # the padded fifth choice
  # ties in reach frequency go to the better log-probability; clipping
  tie = choice_head.evidence_features(
      [[_ev(4, 2, 2, -30.0, None), _ev(4, 2, 2, -3.0, None)]], 2)
  np.testing.assert_array_equal(tie[0, :, 4], [0, 1])
  assert tie[0, 0, 2] == 0.0 and tie[0, 0, 1] == 1.0  # clipped at the floor
  # nothing reached anywhere: no pick
  none = choice_head.evidence_features([[_ev(4, 0, 1, None, 0.5)] * 3], 3)
  assert not none[0, :, 4].any()


def test_head_reads_evidence_and_masks_padding():
  model = choice_head.ChoiceHead(hidden=8, dropout=0.0)
  rng = np.random.default_rng(0)
  q = jnp.asarray(rng.normal(size=(2, 6)), jnp.float32)
  c = jnp.asarray(rng.normal(size=(2, 3, 6)), jnp.float32)
  k = jnp.zeros((2, 3, 6))
  e = jnp.asarray(rng.uniform(size=(2, 3, choice_head.EVIDENCE_DIM)),
                  jnp.float32)
  params = model.init(jax.random.PRNGKey(0), q, c, k, e)["params"]
  assert params["hidden"]["kernel"].shape[0] == 6 * 6 + 3 + \
      choice_head.EVIDENCE_DIM
  mask = jnp.array([[True, True, False], [True, True, True]])
  logits = choice_head.head_logits(model, params, (q, c, k, e), mask)
  assert logits[0, 2] == -1e9 and bool(jnp.all(jnp.isfinite(logits)))
  # the evidence changes the scores (it is read, not ignored)
  other = choice_head.head_logits(model, params, (q, c, k, 1 - e), mask)
  assert not np.allclose(np.asarray(logits)[mask], np.asarray(other)[mask])


def test_evidence_needs_the_frozen_head():
  config = test_config.get_config()
  config.answer.evidence_workdir = "/some/refiner"
  with pytest.raises(ConfigError, match="frozen_head"):
    check_config(config)
  config.answer.model = "frozen_head"
  check_config(config)


def test_refiner_choice_head_probability_is_one_more_feature():
  question = [dict(_ev(8, 4, 3, -2.0, 1.0), choice_prob=0.7),
              dict(_ev(8, 2, 2, -1.0, 2.0), choice_prob=0.3)]
  plain = choice_head.evidence_features([question], 3)
  f = choice_head.evidence_features([question], 3, choice_head=True)
  assert f.shape == (1, 3, choice_head.EVIDENCE_DIM + 1)
  np.testing.assert_array_equal(f[..., :choice_head.EVIDENCE_DIM], plain)
  np.testing.assert_allclose(f[0, :, -1], [0.7, 0.3, 0.0])
  with pytest.raises(ValueError, match="refiner.choice_head=True"):
    choice_head.evidence_features([[_ev(8, 4, 3, -2.0, 1.0)]], 2,
                                  choice_head=True)
  config = test_config.get_config()
  config.answer.evidence_choice_head = True
  with pytest.raises(ConfigError, match="evidence_workdir"):
    check_config(config)


def test_choice_evidence_reads_the_choice_head():
  from racer_jax.agents.graph_agent import choice_evidence
  out = {"choice": np.array([[0, 0, 1, 1, 2, 2]]),
         "reached": np.ones((1, 6), bool), "valid": np.ones((1, 6), bool),
         "log_prob": np.zeros((1, 6)), "score": np.zeros((1, 6)),
         "choice_logits": np.array([[2.0, 0.0, -1e9, 5.0]])}
  ev = choice_evidence(out, 0, 3)
  probs = np.array([e["choice_prob"] for e in ev])
  np.testing.assert_allclose(probs, [np.exp(2) / (np.exp(2) + 1),
                                     1 / (np.exp(2) + 1), 0.0], rtol=1e-6)
  del out["choice_logits"]
  assert all("choice_prob" not in e for e in choice_evidence(out, 0, 3))
