"""``launch/train.py``'s graphdancer stage end to end on the demo graph
with a tiny random Llama: a short SFT, two PPO updates drawn by the
easy-to-hard sampler, a resume after a lost checkpoint that ends with the
same policy, ``launch/evaluate.py``'s figures, and a GRPO update from the
same warm start."""

import json
import shutil

import jax
import numpy as np
import pytest

pytest.importorskip("tunix", reason="the LM extra: pip install -e '.[lm]'")
pytest.importorskip("gguf", reason="the LM extra: pip install -e '.[lm]'")

from flax import nnx  # noqa: E402

from racer_jax.graphdancer import run as run_lib  # noqa: E402
from racer_jax.graphdancer import sft  # noqa: E402
from racer_jax.lm import causal_lm  # noqa: E402
from racer_jax.train import run_stage  # noqa: E402
from racer_jax.train import evaluate_run  # noqa: E402
from tests.lm import tiny_gguf  # noqa: E402

pytestmark = pytest.mark.slow   # two trainings of the tiny model: ~2 min


def _config(model_path, prep):
  from configs import graphdancer_demo
  config = graphdancer_demo.get_config()
  config.prep_dir = str(prep)
  g = config.graphdancer
  g.model = str(model_path)
  g.sft_steps, g.sft_batch_size, g.checkpoint_every = 2, 2, 1
  g.ppo_steps, g.ppo_batch_size = 2, 2
  g.max_turns, g.max_step_tokens, g.max_context_tokens = 4, 8, 2048
  g.actor_learning_rate = g.critic_learning_rate = 1e-3
  g.eval_questions = 3
  return config


def _actor(config, workdir):
  lm = causal_lm.load_causal_lm(config.graphdancer.model)
  lm, _ = sft.restore(lm, (workdir / "sft").resolve())
  run = run_lib.PPORun(config, lm, workdir / "ppo")
  return run.step, nnx.state(run.ppo.actor).to_pure_dict()


def test_sft_then_ppo_resumes_exactly_and_evaluates(tmp_path):
  path = tmp_path / "tiny.gguf"
  tiny_gguf.write_tiny_llama(path)
  config = _config(path, tmp_path / "prep")
  a = tmp_path / "a"
  figures = run_stage.train(config, None, a, progress=False)
  assert figures["warm_start_trajectories"] == 24
  assert figures["step"] == 2 and np.isfinite(figures["policy_loss"])
  lines = [json.loads(x) for x in (a / "ppo_metrics.jsonl").read_text()
           .splitlines()]
  assert [x["step"] for x in lines] == [1, 2]
  assert all(sum(x["groups"]) == 2 for x in lines)
  step, straight = _actor(config, a)
  assert step == 2
  # a run that lost its last checkpoint redoes update 2 from update 1
  b = tmp_path / "b"
  shutil.copytree(a, b)
  shutil.rmtree(b / "ppo" / "2")
  again = run_stage.train(config, None, b, progress=False)
  assert again["step"] == 2
  assert [json.loads(x)["step"] for x in (b / "ppo_metrics.jsonl")
          .read_text().splitlines()] == [1, 2]
  _, resumed = _actor(config, b)
  jax.tree.map(np.testing.assert_array_equal, straight, resumed)
  out = evaluate_run.evaluate_run(config, None, a, {}, progress=False)
  for key in ("valid_format_rate", "valid_call_rate", "evidence_hit",
              "calls_per_question", "unfinished_at_limit", "accuracy"):
    assert 0.0 <= out[key] and 0.0 <= out["zero_shot_" + key]
  assert out["questions"] == out["zero_shot_questions"] == 3
  assert (out["sft_step"], out["ppo_step"]) == (2, 2)
  # GRPO from the same warm start (its sft/ copied): two episodes of one
  # question per update, no critic in the checkpoint
  c = tmp_path / "c"
  c.mkdir()
  shutil.copytree(a / "sft", c / "sft")
  g = config.graphdancer
  g.algorithm, g.grpo_group_size = "grpo", 2
  g.ppo_steps, g.ppo_batch_size, g.ppo_micro_batch_size = 1, 1, 2
  grpo = run_stage.train(config, None, c, progress=False)
  assert grpo["step"] == 1 and np.isfinite(grpo["kl"])
  assert "critic" not in run_lib.PPORun(config, causal_lm.load_causal_lm(
      g.model), c / "ppo")._modules()
