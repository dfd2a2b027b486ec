"""OpenBookQA (Main) over CN-100K. Its test split is held out here, so the
default splits are train and dev; add "test" where you have the file."""

from configs import default


def get_config():
  config = default.get_config()
  config.data.dataset = "obqa"
  config.data.splits = ("train", "dev")
  config.batch.num_choices = 4
  config.walker.graph = "kg"  # RACER's setting: the whole graph
  return config
