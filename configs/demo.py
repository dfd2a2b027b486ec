"""The bundled demo: a small hand-written KG and CommonsenseQA-style questions.

Needs no data directory and no network.
"""

from configs import default


def get_config():
  config = default.get_config()
  config.data.dataset = "demo"
  config.data.splits = ("train", "dev")
  config.kg.source = "demo"
  config.subgraph.max_nodes = 60
  config.subgraph.max_edges = 512
  config.subgraph.max_degree = 16
  config.batch.batch_size = 8
  config.batch.buckets = ((32, 128), (64, 512))
  config.walker.top_k = 8
  config.train.num_steps = 300
  config.train.learning_rate = 3e-3
  config.train.log_every = 25
  config.train.checkpoint_every = 100
  config.eval.batch_size = 8
  config.hygrl.hidden_sizes = (64, 32)
  config.hygrl.max_nodes = 8
  config.hygrl.calibration_questions = 32
  config.hygrl.imitation_steps = 60
  config.hygrl.rl_steps = 120
  # The main job (launch/main.py): memory on, a short refiner, the fast
  # answer model, three evaluation seeds; a quarter of the 32 training
  # questions held out to calibrate the critic, the other 24 build the
  # agents' memory.
  config.memory.enabled = True
  config.answer.validation_fraction = 0.25
  config.agents.memory_from_train = True
  config.refiner.num_steps = 100
  config.answer.model = "frozen_head"
  config.answer.head_epochs = 30.0
  config.answer.head_batch_size = 8
  config.eval.seeds = 3
  return config
