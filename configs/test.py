"""Tiny CPU configuration for tests: the demo data with small budgets."""

from configs import demo


def get_config():
  config = demo.get_config()
  config.subgraph.max_nodes = 30
  config.subgraph.max_edges = 128
  config.subgraph.max_degree = 8
  config.batch.batch_size = 4
  config.batch.buckets = ((16, 64), (32, 128))
  config.walker.hidden = 16
  config.walker.num_walkers = 4
  config.walker.top_k = 4
  config.train.num_steps = 20
  config.train.log_every = 5
  config.train.checkpoint_every = 10
  config.eval.batch_size = 4
  config.hygrl.hidden_sizes = (16, 8)
  config.hygrl.max_nodes = 6
  config.hygrl.imitation_steps = 6
  config.hygrl.rl_steps = 8
  # The demo's main-job settings are opted into per test.
  config.memory.enabled = False
  config.agents.memory_from_train = False
  config.answer.model = "cross_encoder"
  config.eval.seeds = 1
  return config
