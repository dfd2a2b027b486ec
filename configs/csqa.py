"""CommonsenseQA (random split) over CN-100K."""

from configs import default


def get_config():
  return default.get_config()
