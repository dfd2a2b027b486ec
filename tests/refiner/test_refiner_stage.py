"""Multi-path generation, the refiner stage end to end, and exact
save/restore of the shared memory and the refiner."""

import json
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from racer_jax.walker import rollout as rollout_lib
from racer_jax.walker import update as walker_update
from racer_jax.refiner import state as refiner_state
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.walker.inputs import goal_data, whole_graph
from racer_jax.walker.run import load_memory, restore_walker, walker_train_config
from racer_jax.runs.workspace import load_workspace
from racer_jax.refiner import stage as refiner_stage
from tests.conftest import REPO

QUIET = dict(progress=False, log=lambda _: None)


def test_multipath_is_greedy_after_the_switch_and_distinct(walker_run):
  config, walker_dir = walker_run
  ws = load_workspace(config, None, config.prep_dir, ["train"], **QUIET)
  policy, state, _, _ = restore_walker(
      config, walker_dir, embed_dim=ws.concept_emb.shape[1],
      num_edges=ws.kg.num_edges, **{"log": lambda _: None})
  cfg = walker_train_config(config)
  rollout_cfg = cfg.rollout.__class__(**{
      **cfg.rollout.__dict__, "sample_hops": 1, "temperature": 2.0})
  batch = goal_data(config, ws, "train", log=lambda _: None).batch_for_step(
      0, 0, 4)
  graph = whole_graph(config, ws, lambda _: None)
  x = walker_update.goal_inputs(batch, graph, batch.gold, 16)
  run = jax.jit(lambda k: rollout_lib.multipath(
      policy, state.params, graph, x, ws.relation_emb, k, rollout_cfg,
      cfg.reward))
  traj, distinct, log_prob = jax.device_get(run(jax.random.PRNGKey(3)))
  active = traj.active
  # After the switch hop every action is the greedy one; no teacher.
  assert not traj.teacher_forced.any()
  after = active[..., 1:]
  np.testing.assert_array_equal(traj.action[..., 1:][after],
                                traj.greedy_action[..., 1:][after])
  # Distinct paths: no two kept walkers of a question share a path.
  for b in range(distinct.shape[0]):
    kept = [tuple(traj.nodes[b, w]) + tuple(traj.edges[b, w])
            for w in np.flatnonzero(distinct[b])]
    assert len(kept) == len(set(kept))
    walks = {tuple(traj.nodes[b, w]) + tuple(traj.edges[b, w])
             for w in np.flatnonzero(x.start_mask[b])}
    assert len(kept) == len(walks)  # every distinct walk is kept once
  np.testing.assert_allclose(
      log_prob, np.where(active, traj.log_prob, 0.0).sum(-1), rtol=1e-6)
  # Sampling explores: more than one distinct path for some question.
  assert distinct.sum(axis=1).max() > 1


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_refiner_stage_resume_and_evaluation(walker_run, tmp_path):
  config, walker_dir = walker_run
  config = config.copy_and_resolve_references()
  config.memory.enabled = False
  config.train.stage = "refiner"
  config.refiner.walker_workdir = str(walker_dir)
  config.refiner.num_steps = 12
  config.refiner.paths_per_choice = 4
  config.refiner.hidden = 16
  config.train.checkpoint_every = 5
  refiner_stage.train(config, None, tmp_path / "straight", **QUIET)
  refiner_stage.train(config, None, tmp_path / "stopped", stop_after=7,
                      **QUIET)
  refiner_stage.train(config, None, tmp_path / "stopped", **QUIET)
  _, _, template = refiner_state.create_state(config, 64,
                                              config.walker.max_steps)
  finals = []
  for name in ("straight", "stopped"):
    ckpt = Checkpointer(tmp_path / name / "checkpoints")
    state, record, step = ckpt.restore_latest(template)
    ckpt.close()
    assert step == 12 and record["stage"] == "refiner"
    finals.append(state)
  chex.assert_trees_all_equal(finals[0], finals[1])
  out = subprocess.run(
      [sys.executable, str(REPO / "launch/evaluate.py"),
       f"--workdir={tmp_path}/straight", "--progress=false",
       "--top_ks=1,4,64"],
      capture_output=True, text=True, check=True, cwd=tmp_path)
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  for key in ("gold_in_topk_refiner", "gold_in_topk_random",
              "gold_in_topk_logprob", "hit_rate_memory_on",
              "hit_rate_memory_off", "refiner_choice_accuracy",
              "refiner_choice_accuracy_text_only"):
    assert 0.0 <= figures[key] <= 1.0, key
  assert figures["memory_available"]
  assert figures["gold_in_topk_refiner"] <= figures["any_gold_path"]
  # The k' sweep: the k' = top_k row repeats the headline figures, more
  # paths kept never lose a gold one, and keeping every path reaches the
  # ceiling for every selector.
  sweep = {row["top_k"]: row for row in figures["sweep"]}
  assert sorted(sweep) == [1, 4, 64]
  for s in ("refiner", "random", "logprob", "logprob_per_hop"):
    key = f"gold_in_topk_{s}"
    assert sweep[4][key] == figures[key]
    assert sweep[1][key] <= sweep[4][key] <= sweep[64][key]
    assert sweep[64][key] == pytest.approx(figures["any_gold_path"])


def test_memory_and_refiner_checkpoint_roundtrip(walker_run, tmp_path):
  config, walker_dir = walker_run
  ws = load_workspace(config, None, config.prep_dir, ["train"], **QUIET)
  _, state, _, _ = restore_walker(
      config, walker_dir, embed_dim=ws.concept_emb.shape[1],
      num_edges=ws.kg.num_edges, log=lambda _: None)
  assert state.memory.num_edges == ws.kg.num_edges
  assert float(jnp.sum(state.memory.success)) > 0  # training filled it
  ckpt = Checkpointer(tmp_path / "c")
  ckpt.save(1, jax.device_get(state), {})
  fresh = jax.tree.map(jnp.zeros_like, state)
  restored, _, _ = ckpt.restore_latest(fresh)
  ckpt.close()
  chex.assert_trees_all_equal(restored, jax.device_get(state))
  # A new run seeded with this memory starts from exactly these counts.
  seeded = load_memory(walker_dir, ws.kg.num_edges,
                                    ws.concept_emb.shape[1],
                                    log=lambda _: None)
  chex.assert_trees_all_equal(seeded, jax.device_get(state.memory))
