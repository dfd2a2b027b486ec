"""LLM roles in HyGRL's RL stage: the preference mentor and the strict
sufficiency judge through the Gemini client against the stub server, and
the proposal/update contract (the update searches exactly what the
proposal showed)."""

import json

import chex
import jax
import numpy as np
import pytest

from racer_jax.errors import ConfigError
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl import stage as hygrl_stage
from racer_jax.hygrl import state as hygrl_state
from racer_jax.hygrl import update as hygrl_update
from racer_jax.hygrl.mentors import (LLMJudgements, llm_roles, role_backend,
                                     role_names)
from racer_jax.llm import llm_usage
from racer_jax.runs.checkpoints import Checkpointer
from racer_jax.runs.config_checks import check_config
from tests.llm import llm_stubs
from tests.llm.stub_gemini import StubGemini
from tests.trained_runs import QUIET


def test_auto_roles_follow_the_configured_backend(tmp_path):
  from configs import hygrl_2wiki
  config = hygrl_2wiki.get_config()
  assert (config.hygrl.mentor, config.hygrl.judge) == ("auto", "auto")
  assert config.agents.backend == "local"
  assert llm_roles(config) == (False, False)
  logged = []
  assert role_backend(config, tmp_path, logged.append) is None
  assert "offline" in logged[0] and "agents.backend=local" in logged[0]
  config.agents.backend = "openai"
  assert llm_roles(config) == (True, True)
  assert role_names(config) == {"mentor": "llm", "judge": "llm"}
  config.hygrl.judge = "offline"          # forced either way
  assert llm_roles(config) == (True, False)
  config.agents.backend = "local"
  config.hygrl.mentor = "llm"
  assert llm_roles(config) == (True, False)
  config.hygrl.mentor = "gpt"   # the schema refuses it before any work
  with pytest.raises(ConfigError, match=r"hygrl.mentor='gpt': expected one "
                     r"of \['offline', 'llm', 'auto'\]"):
    check_config(config)


def responder(log):
  def respond(req):
    system = json.dumps(req.get("systemInstruction", {}))
    if "strict judge" in system:
      log.append("judge")
      return json.dumps({"sufficient": True})
    log.append("mentor")
    return json.dumps({"prefer": "B"})
  return respond


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_proposal_matches_the_update(retrieval_runs, demo_workspace):
  config, _, _ = retrieval_runs
  config = config.copy_and_resolve_references()
  config.method = "hygrl"
  policy, _, state = hygrl_state.create_state(
      config, demo_workspace.concept_emb.shape[1])
  cfg = hygrl_state.hygrl_config(config)
  batch = demo_workspace.splits["train"].dataset.batch_for_step(0, 0, 4)
  theta = np.zeros(len(hygrl.fusion_metrics(cfg)), np.float32)
  proposal = jax.device_get(hygrl_update.make_rl_proposal(policy, cfg)(
      state, batch, demo_workspace.concept_emb, theta))
  x = hygrl.hygrl_inputs(batch, demo_workspace.concept_emb, cfg)
  rng = jax.random.fold_in(state.rng, state.step)
  plain = hygrl_update.rl_loss(state.params, policy, x, theta, rng, cfg)
  replayed = hygrl_update.rl_loss(state.params, policy, x, theta, rng, cfg, {
      "pref": proposal["offline_pref"],
      "reward_sample": proposal["offline_reward_sample"],
      "reward_greedy": proposal["offline_reward_greedy"]})
  chex.assert_trees_all_close(plain, replayed)
  assert proposal["asked"].any()


@pytest.mark.slow  # trains a HyGRL run
def test_llm_mentor_and_judge_in_training(retrieval_runs, demo_workspace,
                                          tmp_path):
  config, _, _ = retrieval_runs
  config = config.copy_and_resolve_references()
  config.method = "hygrl"
  config.hygrl.mentor = "llm"
  config.hygrl.judge = "llm"
  config.hygrl.llm_pairs_per_question = 1
  config.hygrl.imitation_steps = 1
  config.hygrl.rl_steps = 2
  config.train.log_every = 1
  calls = []
  with StubGemini(responder(calls)) as stub:
    config.agents.backend = "gemini"
    config.agents.base_url = stub.url
    import os
    os.environ["GEMINI_API_KEY"] = "sentinel-training-key"
    try:
      last = hygrl_stage.train(config, None, tmp_path / "run", **QUIET)
    finally:
      del os.environ["GEMINI_API_KEY"]
  assert calls.count("mentor") > 0 and calls.count("judge") > 0
  # The judge called every retrieved subgraph sufficient: full reward.
  assert last["reward_sample"] == 1.0 and last["reward_greedy"] == 1.0
  ckpt = Checkpointer(tmp_path / "run" / "checkpoints")
  record = ckpt.record(ckpt.all_steps()[-1])
  ckpt.close()
  assert record["llm"]["llm_calls"] == len(calls)
  assert record["llm"]["input_tokens"] > 0
  for f in (tmp_path / "run").rglob("*"):
    if f.is_file():
      assert b"sentinel-training-key" not in f.read_bytes(), f


@pytest.mark.parametrize("kind", llm_stubs.KINDS)
def test_failed_calls_fall_back_to_the_offline_values(retrieval_runs,
                                                      demo_workspace, kind):
  config, _, _ = retrieval_runs
  config = config.copy_and_resolve_references()
  policy, _, state = hygrl_state.create_state(
      config, demo_workspace.concept_emb.shape[1])
  cfg = hygrl_state.hygrl_config(config)
  data = demo_workspace.splits["train"]
  batch = data.dataset.batch_for_step(0, 0, 4)
  proposal = jax.device_get(hygrl_update.make_rl_proposal(policy, cfg)(
      state, batch, demo_workspace.concept_emb,
      np.zeros(len(hygrl.fusion_metrics(cfg)), np.float32)))
  with llm_stubs.stub_backend(kind, lambda s, u: "{broken") as (_, backend):
    usage = llm_usage.UsageReport()
    ext = LLMJudgements(backend, demo_workspace.kg, usage,
                        pairs_per_question=1).external(
                            batch, data.examples, proposal)
  asked_once = np.zeros_like(proposal["asked"])
  for b in np.flatnonzero(proposal["usable"]):
    for d, k in np.argwhere(proposal["asked"][b])[:1]:
      asked_once[b, d, k] = True
  np.testing.assert_array_equal(
      ext["pref"], np.where(asked_once, proposal["offline_pref"], 0))
  np.testing.assert_array_equal(ext["reward_sample"],
                                proposal["offline_reward_sample"])
  assert usage.fallbacks == usage.calls > 0
