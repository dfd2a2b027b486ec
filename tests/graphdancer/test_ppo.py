"""The explorer's PPO update on a tiny random Llama: observation tokens
carry no reward, advantage or gradient; the rewarded episode's tokens grow
more likely and the critic's loss falls over a few updates."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

pytest.importorskip("tunix", reason="the LM extra: pip install -e '.[lm]'")
pytest.importorskip("gguf", reason="the LM extra: pip install -e '.[lm]'")

from flax import nnx  # noqa: E402

from racer_jax.graphdancer import model as model_lib  # noqa: E402
from racer_jax.graphdancer import update as update_lib  # noqa: E402
from racer_jax.lm import causal_lm  # noqa: E402
from tests.lm import tiny_gguf  # noqa: E402

pytestmark = pytest.mark.slow   # the tiny model's programs compile: ~30 s


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  path = tmp_path_factory.mktemp("lm") / "tiny.gguf"
  tiny_gguf.write_tiny_llama(path)
  return causal_lm.load_causal_lm(str(path))


def _copy(lm):
  return nnx.merge(lm.graphdef, jax.tree.map(lambda x: x, lm.state))


def _episodes(lm, rng):
  """Two episodes: prompt, a model span, an observation, a model span."""
  pad = lm.tokenizer.pad_id
  prompt = np.full((2, 8), pad, np.int32)
  prompt[:, 2:] = rng.integers(3, 200, (2, 6))
  completion = rng.integers(3, 200, (2, 20)).astype(np.int32)
  mask = np.zeros((2, 20), np.int32)
  mask[:, 0:6] = 1          # the model's first step
  mask[:, 12:17] = 1        # its second; 6..11 an observation
  completion[:, 17:] = pad  # right padding
  return prompt, completion, mask


def _make(lm, seed=0, lr=3e-3, micro=0):
  actor, reference = _copy(lm), _copy(lm)
  critic = model_lib.critic_of(lm, seed)
  return update_lib.PPOUpdate(
      actor, critic, reference, actor_tx=optax.adam(lr),
      critic_tx=optax.adam(lr), settings=update_lib.PPOSettings(),
      pad_id=lm.tokenizer.pad_id, eos_id=lm.tokenizer.eos_id,
      micro_batch_size=micro)


def test_observations_get_no_reward_advantage_or_gradient(tiny):
  rng = np.random.default_rng(0)
  prompt, completion, mask = _episodes(tiny, rng)
  ppo = _make(tiny)
  batch = ppo.batch(prompt, completion, mask, [1.0, 0.0])
  adv = np.asarray(batch.advantages)
  # the critic starts at 0: before whitening, the rewarded episode's
  # model tokens all see return 1, the other's 0
  returns = np.asarray(batch.returns)
  np.testing.assert_allclose(returns[0][mask[0] == 1], 1.0, atol=1e-2)
  np.testing.assert_allclose(returns[1][mask[1] == 1], 0.0, atol=1e-2)
  assert adv[0][mask[0] == 1].mean() > adv[1][mask[1] == 1].mean()
  # the policy loss does not depend on anything at an observation token
  from tunix.rl import algo_core
  from tunix.rl.ppo import ppo_learner
  algo = ppo_learner.PPOConfig(beta=0.0)
  loss = lambda b: float(algo_core.ppo_policy_loss_fn(
      ppo.actor, b, algo, ppo.pad_id, ppo.eos_id)[0])
  obs = jnp.asarray(mask == 0)
  noisy = batch.replace(
      advantages=jnp.where(obs, 99.0, batch.advantages),
      old_per_token_logps=jnp.where(obs, -7.0, batch.old_per_token_logps))
  with causal_lm.rope_theta_of(ppo.actor):
    assert loss(noisy) == pytest.approx(loss(batch), rel=1e-6)


@pytest.mark.parametrize("micro", [0, 1])
def test_updates_favour_the_rewarded_episode(tiny, micro):
  rng = np.random.default_rng(1)
  prompt, completion, mask = _episodes(tiny, rng)
  ppo = _make(tiny, micro=micro)

  def gap():
    with causal_lm.rope_theta_of(ppo.actor):
      lp = np.asarray(ppo._logps(ppo.actor, jnp.asarray(prompt),
                                 jnp.asarray(completion), ppo.pad_id,
                                 ppo.eos_id))
    return float((lp[0] * mask[0]).sum() - (lp[1] * mask[1]).sum())

  before, value_losses = gap(), []
  for _ in range(4):
    metrics = ppo.update(ppo.batch(prompt, completion, mask, [1.0, 0.0]))
    value_losses.append(metrics["value_loss"])
    assert np.isfinite(list(metrics.values())).all()
  assert gap() > before + 0.5
  assert value_losses[-1] < value_losses[0]
  # the reference does not move
  jax.tree.map(np.testing.assert_array_equal,
               nnx.state(ppo.reference).to_pure_dict(),
               tiny.state.to_pure_dict())
