"""The explorer on 2WikiMultiHopQA's passage graph (the shared data) with a
tiny random Llama: gold trajectories read the gold passages and score 1,
the stage trains (SFT + one PPO update) and the evaluation reports EM, F1
and ROUGE-L, on 2Wiki's dev quarter and, the transfer test, on HotpotQA's
sample."""

import pytest

pytest.importorskip("tunix", reason="the LM extra: pip install -e '.[lm]'")
pytest.importorskip("gguf", reason="the LM extra: pip install -e '.[lm]'")

from racer_jax.graphdancer import passage_task as passages  # noqa: E402
from racer_jax.graphdancer import trajectories  # noqa: E402
from racer_jax.graphdancer.episode import (Environment, reward,  # noqa: E402
                                           valid_sequence)
from racer_jax.train import evaluate_run, run_stage  # noqa: E402
from tests.lm import tiny_gguf  # noqa: E402
from tests.trained_runs import QUIET  # noqa: E402

pytestmark = pytest.mark.slow   # the 2Wiki graph and two tiny trainings


def _config(tmp_path, model):
  from configs import graphdancer_2wiki
  config = graphdancer_2wiki.get_config()
  config.text.encoder = "static"
  config.prep_dir = str(tmp_path / "prep")
  g = config.graphdancer
  g.model = str(model)
  g.sft_steps, g.sft_batch_size = 1, 2
  g.ppo_steps, g.ppo_batch_size = 1, 2
  g.max_step_tokens, g.max_observation_tokens = 8, 48
  g.max_context_tokens, g.eval_questions = 4096, 2
  return config


def test_gold_passage_trajectories(tmp_path, data_dir):
  config = _config(tmp_path, "unused")
  task = passages.load(config, data_dir, tmp_path / "prep",
                       log=QUIET["log"])
  env = Environment(task.tools, max_turns=10)
  played = 0
  for q in task.split("train")[:40]:
    titles = task.gold_titles(q)
    out = trajectories.passage_trajectory(env, q, titles)
    if out is None or len(titles) * 2 + 1 > 10:
      continue
    episode, kept = out
    played += 1
    assert valid_sequence(episode.response) == (True, "")
    assert reward(episode.response, [q.answer]) == 1.0
    observations = [s.text for s in episode.segments if not s.by_model]
    for title, (found, text) in zip(kept, zip(observations[::2],
                                              observations[1::2])):
      assert f"P:{title}" in found
      assert task.data.texts[task.data.titles.index(title)][:40] in text
  assert played >= 30
  assert {task.group(q) for q in task.split("train")} >= {1, 2}


def test_stage_and_transfer_evaluation(tmp_path, data_dir):
  path = tmp_path / "tiny.gguf"
  tiny_gguf.write_tiny_llama(path)
  config = _config(tmp_path, path)
  workdir = tmp_path / "run"
  figures = run_stage.train(config, data_dir, workdir, progress=False)
  assert figures["warm_start_trajectories"] > 400
  assert figures["step"] == 1
  out = evaluate_run.evaluate_run(config, data_dir, workdir, {},
                                  progress=False)
  for key in ("exact_match", "f1", "rouge_l", "valid_format_rate",
              "evidence_hit", "zero_shot_exact_match"):
    assert 0.0 <= out[key] <= 1.0
  assert out["questions"] == 2 and "accuracy" not in out
  other = config.copy_and_resolve_references()
  other.multihop.dataset = "hotpotqa"
  eval_file = data_dir / "multihop" / "hotpotqa_train_sample100.json"
  moved = evaluate_run.evaluate_run(other, data_dir, workdir,
                                    {"eval_file": str(eval_file)},
                                    progress=False)
  assert moved["questions"] == 2
  assert (workdir / "eval" / "hotpotqa_train_sample100.explorer"
          / "metrics.json").exists()
