"""HyGRL on the HotpotQA sample (100 questions over its own corpus, exact
gold passages), run as configs/hygrl_2wiki.py runs 2WikiMultiHopQA: the
same paper hyperparameters, a fixed quarter of the questions as dev.

  python launch/train.py --config=configs/hygrl_hotpotqa.py \\
      --data_dir=../shared/data --workdir=runs/hygrl_hotpotqa
  python launch/evaluate.py --workdir=runs/hygrl_hotpotqa \
      --data_dir=../shared/data
"""

from configs import hygrl_2wiki


def get_config():
  config = hygrl_2wiki.get_config()
  config.multihop.dataset = "hotpotqa"
  # about 80 training questions: batches of 64 (256 would be three
  # quarters padding), fewer updates
  config.hygrl.calibration_questions = 80
  config.batch.batch_size = 64
  config.hygrl.imitation_steps = 100
  config.hygrl.rl_steps = 100
  return config
