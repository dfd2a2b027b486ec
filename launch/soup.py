r"""A model soup: one answer model whose weights are the mean of several
answer runs' weights (``racer_jax/answer/soup.py``).

  python launch/soup.py \
      --workdirs=runs/csqa_triples_s3,runs/csqa_triples_s4 \
      --out=runs/csqa_triples_soup [--data_dir=DATA --evaluate]

The soup folder is an answer run (evaluate it with
``launch/evaluate.py --workdir=SOUP --answer_only``, ask it with
``launch/answer.py``). With ``--evaluate`` the soup and, for comparison,
the ingredients' probability ensemble are evaluated on the config's split;
the last line is one JSON object: ``ingredients``, ``accuracy`` (the soup),
``accuracy_ingredients``, ``accuracy_ensemble`` (with ``--evaluate``).
"""

import json

from absl import flags, logging

from racer_jax import entry_point
from racer_jax.answer import soup as model_soup

_WORKDIRS = flags.DEFINE_list("workdirs", None, "Answer runs to average "
                              "(at least two).", required=True)
_OUT = flags.DEFINE_string("out", None, "New folder for the soup.",
                           required=True)
_EVALUATE = flags.DEFINE_bool("evaluate", False, "Also evaluate the soup "
                              "and the ingredients' ensemble.")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "Data directory (default: "
                                "RACER_DATA_DIR or the bundled demo data).")
_SPLIT = flags.DEFINE_string("split", None, "Split to evaluate (default: "
                             "the run's eval.split).")


def main():
  if not _EVALUATE.value and (_SPLIT.value or _DATA_DIR.value):
    entry_point.fail("--split and --data_dir apply only with --evaluate")
  soup = model_soup.make_soup(_WORKDIRS.value, _OUT.value,
                              log=logging.info)
  figures = dict(soup)
  print(f"soup of {len(soup['ingredients'])} runs written to {_OUT.value}")
  if _EVALUATE.value:
    figures.update(model_soup.evaluate_soup(_OUT.value, _DATA_DIR.value,
                                            _SPLIT.value, log=logging.info))
    print(f"soup {figures['accuracy']:.4f}; ingredients "
          + ", ".join(f"{a:.4f}" for a in figures["accuracy_ingredients"])
          + f"; their ensemble {figures['accuracy_ensemble']:.4f}")
  print(json.dumps(figures))


if __name__ == "__main__":
  entry_point.run(main)
