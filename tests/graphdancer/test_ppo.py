"""The explorer's PPO and GRPO updates on a tiny random Llama: observation
tokens carry no reward, advantage or gradient; the rewarded episode's
tokens grow more likely and the critic's loss falls over a few updates;
micro-batches whiten over the whole batch; 8 devices update as one."""

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
  [batch] = ppo.batch(prompt, completion, mask, [1.0, 0.0])
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
def test_updates_favour_the_rewarded_episode(tiny, micro, monkeypatch):
  from tunix.rl import algo_core
  traces = []
  loss_fn = algo_core.ppo_policy_loss_fn
  monkeypatch.setattr(algo_core, "ppo_policy_loss_fn",
                      lambda *a, **k: traces.append(1) or loss_fn(*a, **k))
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
  # one trace of the policy's gradient for all updates and micro-batches:
  # no recompile after the first update
  assert len(traces) == 1
  # the reference does not move
  jax.tree.map(np.testing.assert_array_equal,
               nnx.state(ppo.reference).to_pure_dict(),
               tiny.state.to_pure_dict())


def test_micro_batches_see_the_whole_batch(tiny):
  """Split in micro-batches, the advantages are whitened over the whole
  batch (as tunix's masked_whiten of the concatenation) and one update
  takes the same step as on the whole batch at once."""
  rng = np.random.default_rng(2)
  prompt, completion, mask = _episodes(tiny, rng)
  whole, split = _make(tiny, micro=0), _make(tiny, micro=1)
  a = whole.batch(prompt, completion, mask, [1.0, 0.0])
  b = split.batch(prompt, completion, mask, [1.0, 0.0])
  assert len(a) == 1 and len(b) == 2
  for field in ("advantages", "returns", "old_per_token_logps"):
    np.testing.assert_allclose(
        np.asarray(getattr(a[0], field)),
        np.concatenate([np.asarray(getattr(x, field)) for x in b]),
        atol=2e-5)
  whole.update(a)
  split.update(b)
  jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, atol=1e-5),
               nnx.state(whole.actor).to_pure_dict(),
               nnx.state(split.actor).to_pure_dict())


def test_grpo_favours_the_better_episode_of_each_group(tiny):
  rng = np.random.default_rng(3)
  p1, c1, m1 = _episodes(tiny, rng)
  p2, c2, m2 = _episodes(tiny, rng)
  prompt, completion = np.concatenate([p1, p2]), np.concatenate([c1, c2])
  mask = np.concatenate([m1, m2])
  rewards = [1.0, 0.2, 0.0, 0.0]     # groups of 2: (1.0, 0.2), (0, 0)
  adv = update_lib.group_advantages(rewards, 2)
  assert adv[0] > 0 > adv[1] and adv[2] == adv[3] == 0.0
  with pytest.raises(ValueError, match="groups of 3"):
    update_lib.group_advantages(rewards, 3)
  grpo = update_lib.GRPOUpdate(
      _copy(tiny), _copy(tiny), actor_tx=optax.adam(3e-3), group_size=2,
      settings=update_lib.PPOSettings(kl_coef=0.001),
      pad_id=tiny.tokenizer.pad_id, eos_id=tiny.tokenizer.eos_id,
      micro_batch_size=2)

  def logp(i):
    with causal_lm.rope_theta_of(grpo.actor):
      lp = np.asarray(grpo._logps(grpo.actor, jnp.asarray(prompt[i:i + 1]),
                                  jnp.asarray(completion[i:i + 1]),
                                  grpo.pad_id, grpo.eos_id))
    return float((lp[0] * mask[i]).sum())

  before = [logp(i) for i in range(4)]
  for _ in range(3):
    chunks = grpo.batch(prompt, completion, mask, adv)
    assert len(chunks) == 2
    # every model token of an episode carries its advantage, no other
    np.testing.assert_allclose(np.asarray(chunks[0].advantages),
                               adv[:2, None] * mask[:2], atol=1e-6)
    metrics = grpo.update(chunks)
    assert np.isfinite(list(metrics.values())).all()
  after = [logp(i) for i in range(4)]
  assert after[0] - before[0] > 0.5 and after[1] < before[1]
  jax.tree.map(np.testing.assert_array_equal,
               nnx.state(grpo.reference).to_pure_dict(),
               tiny.state.to_pure_dict())


MESH = """
import sys
sys.path.insert(0, {repo!r})
import jax, numpy as np, optax
from flax import nnx
from racer_jax.graphdancer import model as model_lib, update as update_lib
from racer_jax.lm import causal_lm, generation
from racer_jax.runs import parallel
from tests.lm import tiny_gguf
assert jax.device_count() == 8
tiny_gguf.write_tiny_llama({path!r})
lm = causal_lm.load_causal_lm({path!r})
copy = lambda: nnx.merge(lm.graphdef, jax.tree.map(lambda x: x, lm.state))
rng = np.random.default_rng(0)
pad = lm.tokenizer.pad_id
prompt = np.full((8, 8), pad, np.int32)
prompt[:, 2:] = rng.integers(3, 200, (8, 6))
completion = rng.integers(3, 200, (8, 20)).astype(np.int32)
mask = np.zeros((8, 20), np.int32)
mask[:, :6] = 1
mask[:, 12:17] = 1
completion[:, 17:] = pad
rewards = rng.uniform(0, 1, 8).tolist()
finals = []
for mesh in (None, parallel.make_mesh(8)):
  ppo = update_lib.PPOUpdate(
      copy(), model_lib.critic_of(lm, 0), copy(), actor_tx=optax.adam(3e-3),
      critic_tx=optax.adam(3e-3), settings=update_lib.PPOSettings(),
      pad_id=pad, eos_id=lm.tokenizer.eos_id, micro_batch_size=8,
      mesh=mesh)
  for _ in range(2):
    chunks = ppo.batch(prompt, completion, mask, rewards)
    if mesh is not None:
      assert len(chunks[0].completion_ids.sharding.device_set) == 8
    ppo.update(chunks)
  finals.append(nnx.state(ppo.actor).to_pure_dict())
  if mesh is not None:
    leaf = jax.tree.leaves(nnx.state(ppo.actor))[0]
    assert leaf.sharding.is_fully_replicated and len(leaf.devices()) == 8
    # the sampler reads one device's copy of the replicated policy
    gen = generation.Generator(lm, max_new_tokens=4,
                               model=update_lib.local_view(ppo.actor))
    one = generation.Generator(lm, max_new_tokens=4,
                               model=nnx.merge(lm.graphdef,
                                               jax.device_get(finals[0])))
    ids = [[5, 6, 7, 8]]
    assert gen.generate_ids(ids) == one.generate_ids(ids), "sampler"
diffs = jax.tree.leaves(jax.tree.map(
    lambda a, b: float(np.max(np.abs(np.asarray(a) - np.asarray(b)))),
    *finals))
print("max abs diff", max(diffs))
assert max(diffs) < 1e-4, max(diffs)
# the warm start: tunix's trainer under the mesh, 8 rows split over it
from pathlib import Path
from racer_jax.graphdancer import sft
rows = [(list(rng.integers(3, 200, 12 + i)), [0] * 4 + [1] * (8 + i))
        for i in range(8)]
tuned = []
for i, mesh in enumerate((None, parallel.make_mesh(8))):
  out, losses = sft.train(lm, rows, steps=2, batch_size=8,
                          learning_rate=3e-3, weight_decay=0.0,
                          warmup_steps=0, seed=0,
                          checkpoint_dir=Path({path!r}).parent / f"sft{{i}}",
                          checkpoint_every=10, mesh=mesh,
                          log=lambda _: None)
  tuned.append(jax.device_get(out.state.to_pure_dict()))
diffs = jax.tree.leaves(jax.tree.map(
    lambda a, b: float(np.max(np.abs(a - b))), *tuned))
assert max(diffs) < 1e-4, ("sft", max(diffs))
print("OK")
"""


def test_eight_devices_update_as_one(tmp_path):
  """PPO and the SFT warm start over a mesh of 8 CPU devices (each
  (micro-)batch split over them, the models replicated) reach the
  parameters of one device."""
  import os
  import subprocess
  import sys
  from tests.conftest import REPO
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             XLA_FLAGS="--xla_force_host_platform_device_count=8")
  out = subprocess.run(
      [sys.executable, "-c", MESH.format(repo=str(REPO),
                                         path=str(tmp_path / "t.gguf"))],
      capture_output=True, text=True, env=env, timeout=900, cwd=REPO)
  assert out.returncode == 0, out.stderr[-3000:]
  assert "OK" in out.stdout, out.stdout
