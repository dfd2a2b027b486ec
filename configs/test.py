"""Tiny CPU configuration for tests: the demo data with small budgets."""

from configs import demo


def get_config():
  config = demo.get_config()
  config.subgraph.max_nodes = 30
  config.subgraph.max_edges = 128
  config.subgraph.max_degree = 8
  config.batch.batch_size = 4
  config.batch.buckets = ((16, 64), (32, 128))
  return config
