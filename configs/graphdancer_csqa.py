"""GraphDancer's explorer on CommonsenseQA over CN-100K: SmolLM2-135M-Instruct
learns from gold trajectories of the training questions, then by PPO with
the paper's easy-to-hard sampler (``graphdancer.curriculum=uniform``:
vanilla PPO). Settings scaled for CPU; ``configs/graphdancer_2wiki.py:paper``
shows the paper's own for an accelerator.

  python launch/train.py --config=configs/graphdancer_csqa.py --workdir=RUN
  python launch/evaluate.py --workdir=RUN
"""

from configs import csqa


def get_config():
  config = csqa.get_config()
  config.method = "graphdancer"
  config.train.stage = "graphdancer"
  config.memory.enabled = False    # the walker's memory: not read here
  g = config.graphdancer
  g.sft_steps = 300
  g.sft_batch_size = 4
  g.sft_learning_rate = 5e-5
  g.ppo_steps = 30
  g.ppo_batch_size = 8
  g.ppo_micro_batch_size = 1
  g.actor_learning_rate = 5e-6
  g.critic_learning_rate = 2e-5
  g.eval_questions = 200
  return config
