"""CommonsenseQA (random split) over CN-100K."""

from configs import default


def get_config():
  config = default.get_config()
  config.walker.graph = "kg"  # RACER's setting: the whole graph
  return config
