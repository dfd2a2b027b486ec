"""HyGRL's settings and train state, shared by its stages, evaluations and
agent."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from racer_jax.hygrl import passage_reranker
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl.beam import BeamConfig
from racer_jax.hygrl.search import HyGRLConfig
from racer_jax.memory import edge_memory
from racer_jax.walker import update as train_lib
from racer_jax.walker.policy import HyGRLPolicy


def create_state(config, embed_dim: int):
  """``(policy, optimizer, fresh TrainState)``."""
  policy = make_hygrl_policy(config)
  optimizer = train_lib.make_optimizer(config.hygrl.learning_rate,
                                       config.train.grad_clip)
  rng = jax.random.PRNGKey(config.seed)
  params = hygrl.init_hygrl_policy(
      policy, jax.random.fold_in(rng, 0x5eed), embed_dim, config.hygrl.window,
      choice_feature=hygrl_config(config).policy_choice)
  state = train_lib.TrainState(params=params, opt_state=optimizer.init(params),
                               step=jnp.zeros((), jnp.int32), rng=rng,
                               memory=edge_memory.empty(1))  # unused
  return policy, optimizer, state


def hygrl_config(config):
  """The static HyGRL settings from an ``ml_collections`` config."""
  h = config.hygrl
  return HyGRLConfig(
      beam=BeamConfig(beam_width=h.beam_width, tau=h.tau,
                      max_depth=h.max_depth, max_nodes=h.max_nodes,
                      window=h.window),
      heuristic_tau=h.heuristic_tau, restart_prob=h.restart_prob,
      ppr_iters=h.ppr_iters, label_high=h.label_high, label_low=h.label_low,
      pairs_per_step=h.pairs_per_step, margin=h.margin,
      margin_weight=h.margin_weight, scst_gamma=h.scst_gamma,
      policy_choice=bool(h.policy_choice),
      heuristic_choice=bool(h.heuristic_choice),
      policy_features=h.policy_features,
      reward=h.reward,
      pair_scorer=_pair_scorer(config),
      heuristic_semantic=h.heuristic_semantic,
      pair_anchor=h.pair_anchor)


def _pair_scorer(config):
  """The in-search cross-encoder of ``multihop.relevance=
  cross_encoder_state`` (with ``multihop.node_pairs=cross_encoder`` it
  scores the node-to-node entries too; ``multihop.reranker.
  pairs_per_chunk`` at a time), else None."""
  m = config.multihop
  if (config.method != "hygrl_multihop" or
      m.relevance != "cross_encoder_state"):
    return None
  return passage_reranker.pair_scorer(
      config.text.model_dir or None, int(m.reranker.max_length),
      m.node_pairs == "cross_encoder",
      int(m.reranker.pairs_per_chunk))


def make_hygrl_policy(config):
  return HyGRLPolicy(hidden_sizes=tuple(config.hygrl.hidden_sizes))
