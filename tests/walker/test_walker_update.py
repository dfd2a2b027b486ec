"""The jitted walker update: one compile over batches, NaN guard, exact
checkpoints and resume (the shared memory too), learning on the demo KG."""

import functools
import json
import subprocess
import sys

import chex
import jax
import numpy as np
import pytest

from configs import demo as demo_config
from configs import test as test_config
from racer_jax.walker.evaluation import run_eval
from racer_jax.walker import update as train_lib
from racer_jax.walker import run as walker_run
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.walker.inputs import goal_data, whole_graph
from racer_jax.runs.workspace import load_workspace
from racer_jax.walker import stage as walker_stage
from tests.conftest import REPO


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory):
  config = test_config.get_config()
  prep = tmp_path_factory.mktemp("prep")
  ws = load_workspace(config, None, prep, ["train", "dev"], progress=False,
                      log=lambda _: None)
  return (config, ws, whole_graph(config, ws, lambda _: None),
          goal_data(config, ws, "train", log=lambda _: None))


def _setup(config, ws, memory_edges: int = 0):
  policy = walker_run.make_policy(config)
  optimizer = train_lib.make_optimizer(config.train.learning_rate,
                                       config.train.grad_clip)
  state = train_lib.create_train_state(policy, optimizer, config.seed,
                                       ws.concept_emb.shape[1],
                                       memory_edges=memory_edges)
  return policy, optimizer, state


def test_one_trace_over_batches(demo_ws):
  config, ws, graph, data = demo_ws
  policy, optimizer, state = _setup(config, ws)
  # One program, traced exactly once over several batches (the last one
  # padded).
  update = train_lib.make_train_step(
      policy, optimizer, walker_run.walker_train_config(config), donate=False,
      wrap=functools.partial(chex.assert_max_traces, n=1))
  for start in range(0, min(len(data), 14), 4):
    positions = np.arange(start, min(start + 4, len(data)))
    state, metrics = update(state, graph, data.batch(positions, 4),
                            ws.relation_emb, np.float32(0.5))
    assert float(metrics["finite"]) == 1.0


def test_nan_guard_keeps_parameters(demo_ws):
  config, ws, graph, data = demo_ws
  policy, optimizer, state = _setup(config, ws)
  update = train_lib.make_train_step(policy, optimizer,
                                     walker_run.walker_train_config(config),
                                     donate=False)
  bad = np.full_like(ws.relation_emb, np.nan)
  new, metrics = update(state, graph, data.batch_for_step(0, 0, 4), bad,
                        np.float32(0.5))
  assert float(metrics["finite"]) == 0.0
  chex.assert_trees_all_equal(new.params, state.params)
  assert int(new.step) == 1


def test_checkpoint_roundtrip_is_exact(demo_ws, tmp_path):
  config, ws, graph, data = demo_ws
  policy, optimizer, state = _setup(config, ws)
  update = train_lib.make_train_step(policy, optimizer,
                                     walker_run.walker_train_config(config))
  for step in range(3):
    state, _ = update(state, graph, data.batch_for_step(step, 0, 4),
                      ws.relation_emb, np.float32(0.5))
  state = jax.device_get(state)
  ckpt = Checkpointer(tmp_path / "ckpt")
  ckpt.save(3, state, {"note": "x"})
  _, _, template = _setup(config, ws)
  restored, record, step = ckpt.restore_latest(template)
  ckpt.close()
  assert step == 3 and record == {"note": "x"}
  chex.assert_trees_all_equal(restored, state)
  assert jax.tree.structure(restored) == jax.tree.structure(state)


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_resume_after_stop_equals_uninterrupted(tmp_path):
  config = test_config.get_config()
  config.prep_dir = str(tmp_path / "prep")
  config.walker.bandwidth = 16
  config.memory.enabled = True  # the shared memory is checkpointed too
  quiet = dict(progress=False, log=lambda _: None)
  walker_stage.train(config, None, tmp_path / "straight", **quiet)
  walker_stage.train(config, None, tmp_path / "stopped", stop_after=13,
                     **quiet)  # dies after step 13; last checkpoint: 10
  walker_stage.train(config, None, tmp_path / "stopped", **quiet)
  ws = load_workspace(config, None, config.prep_dir, ["train"], **quiet)
  _, _, template = _setup(config, ws, memory_edges=ws.kg.num_edges
                          if config.memory.enabled else 0)
  finals = []
  for name in ("straight", "stopped"):
    ckpt = Checkpointer(tmp_path / name / "checkpoints")
    state, _, step = ckpt.restore_latest(template)
    ckpt.close()
    assert step == config.train.num_steps
    finals.append(state)
  if config.memory.enabled:
    assert float(finals[0].memory.success.sum() +
                 finals[0].memory.failure.sum()) > 0
  chex.assert_trees_all_equal(finals[0], finals[1])


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_training_beats_untrained_on_demo(tmp_path):
  config = demo_config.get_config()
  config.memory.enabled = False  # the plain walker (the demo keeps one)
  config.prep_dir = str(tmp_path / "prep")
  quiet = dict(progress=False, log=lambda _: None)
  walker_stage.train(config, None, tmp_path / "run", **quiet)
  ws = load_workspace(config, None, config.prep_dir, ["dev"], **quiet)
  policy, _, untrained = _setup(config, ws)
  ckpt = Checkpointer(tmp_path / "run" / "checkpoints")
  trained, _, _ = ckpt.restore_latest(untrained)
  ckpt.close()
  evaluate = train_lib.make_eval_step(policy,
                                      walker_run.walker_train_config(config))
  args = (whole_graph(config, ws, lambda _: None),
          goal_data(config, ws, "dev", log=lambda _: None),
          ws.splits["dev"].examples, ws.kg, ws.relation_emb, 8)
  before = run_eval(evaluate, untrained.params, *args)
  after = run_eval(evaluate, trained.params, *args)
  print(f"demo dev path hit rate: untrained {before['path_hit_rate']:.3f}, "
        f"trained {after['path_hit_rate']:.3f}")
  # 0.250 -> 0.667 of the 12 dev questions on 7 Dec 2026
  assert after["path_hit_rate"] >= before["path_hit_rate"] + 0.25
  assert after["path_hit_rate"] >= 0.6
  assert after["oracle_hit_rate"] == 1.0


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_cli_train_then_evaluate(tmp_path):
  run = lambda *args: subprocess.run(
      [sys.executable, *args], capture_output=True, text=True, check=True,
      cwd=tmp_path).stdout.strip().splitlines()[-1]
  run(str(REPO / "launch/train.py"), f"--config={REPO}/configs/test.py",
      f"--workdir={tmp_path}/w", "--progress=false")
  figures = json.loads(run(str(REPO / "launch/evaluate.py"),
                           f"--workdir={tmp_path}/w", "--progress=false"))
  for key in ("path_hit_rate", "oracle_hit_rate", "mean_path_length"):
    assert 0.0 <= figures[key] <= 3.0
  assert figures["step"] == 20
  assert (tmp_path / "w" / "metrics.jsonl").exists()
  assert list((tmp_path / "w" / "tensorboard").iterdir())
