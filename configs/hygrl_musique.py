"""HyGRL on the MuSiQue sample, run as configs/hygrl_2wiki.py runs
2WikiMultiHopQA (:func:`configs.hygrl_2wiki.sample_config`).

  python launch/train.py --config=configs/hygrl_musique.py --workdir=runs/hygrl_musique
  python launch/evaluate.py --workdir=runs/hygrl_musique
"""

from configs import hygrl_2wiki


def get_config():
  return hygrl_2wiki.sample_config("musique")
