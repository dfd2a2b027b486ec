"""GraphDancer's explorer on HippoRAG's 2WikiMultiHopQA passage graph: the
LM reads passages through the graph functions (``NodeFeature[P:title,
text]``) and answers with a short string (EM, F1, ROUGE-L). Trained on the
training three quarters of the questions; the paper's transfer test
evaluates it on the HotpotQA and MuSiQue samples it never saw::

  python launch/train.py --config=configs/graphdancer_2wiki.py --workdir=RUN
  python launch/evaluate.py --workdir=RUN
  python launch/evaluate.py --workdir=RUN --config=configs/graphdancer_2wiki.py \\
      --config.multihop.dataset=hotpotqa \\
      --eval_file=DATA/multihop/hotpotqa_train_sample100.json

``--config=configs/graphdancer_2wiki.py:paper`` sets the paper's run for an
accelerator (batch 128, 150 updates, actor 1e-6, critic 1e-5, KL 0.001,
temperature 0.7, 10 turns, prompt / response / observation caps 8192 / 500
/ 1024, bfloat16); name the model with ``--config.graphdancer.model=`` (a
Hugging Face folder such as Qwen2.5-3B-Instruct, the paper's backbone).

The paper's comparison from one warm start: train with
``--config.graphdancer.ppo_steps=0`` once, copy its ``sft/`` folder into
each arm's workdir (``curriculum=easy_to_hard``, ``curriculum=uniform``,
``algorithm=grpo``), and train each: a finished warm start is resumed,
not redone.
"""

from configs import default


def get_config(setting: str = "cpu"):
  if setting not in ("cpu", "paper"):
    raise ValueError(f"configs/graphdancer_2wiki.py:{setting}: cpu or paper")
  config = default.get_config()
  config.method = "graphdancer"
  config.train.stage = "graphdancer"
  config.text.encoder = "minilm"   # RetrieveNode's title vectors
  config.multihop.dataset = "2wiki"
  g = config.graphdancer
  g.graph = "passages"
  g.max_turns = 10
  if setting == "paper":
    g.dtype = "bfloat16"
    g.max_step_tokens = 500
    g.max_observation_tokens = 1024
    g.max_context_tokens = 8192
    g.sft_steps, g.sft_batch_size = 200, 32
    g.ppo_steps, g.ppo_batch_size, g.ppo_micro_batch_size = 150, 128, 8
    g.actor_learning_rate, g.critic_learning_rate = 1e-6, 1e-5
    return config
  g.max_step_tokens = 96
  g.max_observation_tokens = 256
  g.max_context_tokens = 2048
  g.sft_steps, g.sft_batch_size = 200, 2   # 400 of the 622 trajectories
  g.ppo_steps, g.ppo_batch_size, g.ppo_micro_batch_size = 30, 8, 1
  g.actor_learning_rate, g.critic_learning_rate = 5e-6, 2e-5
  g.eval_questions = 100
  return config
