r"""Builds the KG store, grounds a dataset and caches its subgraphs.

  python launch/prepare.py --config=configs/demo.py --out_dir=/tmp/racer_demo
  python launch/prepare.py --config=configs/csqa.py \
      --data_dir=DATA --out_dir=runs/csqa_prep

Prints progress and a report; the last line is one JSON object with the
figures (``questions``, ``question_grounded_fraction``,
``choice_grounded_fraction``, ``gold_reachable_within_{1,2,3}_hops``, ...).
"""

import json
import os

from absl import flags
from ml_collections import config_flags

from racer_jax import entry_point
from racer_jax.runs.config_checks import check_config
from racer_jax.data import prepare as prepare_lib

_CONFIG = config_flags.DEFINE_config_file(
    "config", os.path.join(os.path.dirname(__file__), "..", "configs",
                           "default.py"), "Configuration file.")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_OUT_DIR = flags.DEFINE_string("out_dir", None, "Output directory.",
                               required=True)
_ON_BAD_LINE = flags.DEFINE_enum(
    "on_bad_line", None, ["error", "skip"],
    "Override config.data.on_bad_line: stop at a malformed line, or skip and "
    "count it.")
_PROGRESS = flags.DEFINE_bool("progress", True, "Show progress bars.")


def _print_report(report: dict) -> None:
  kg = report["kg"]
  print(f"\nKG: {kg['concepts']:,} concepts, {kg['triples']:,} triples "
        f"({kg['edges_with_inverses']:,} edges with inverses); dropped at "
        f"ingest: {kg['ingest_dropped']}")
  for name, s in report["splits"].items():
    reach = ", ".join(
        f"{k.split('_')[-2]}: {s[k]:.1%}" for k in s
        if k.startswith("gold_reachable_within_") and s[k] is not None)
    print(f"{name:>6}: {s['questions']:,} questions "
          f"({s['load']['skipped']} bad lines skipped); question concepts in "
          f"{s['question_grounded'] / max(s['questions'], 1):.1%}, choices "
          f"grounded {s['choices_grounded'] / max(s['choices'], 1):.1%}; "
          f"nodes p50/p90/max {s['subgraph_nodes'].get('p50')}/"
          f"{s['subgraph_nodes'].get('p90')}/{s['subgraph_nodes'].get('max')}"
          f", edges p50/p90/max {s['subgraph_edges'].get('p50')}/"
          f"{s['subgraph_edges'].get('p90')}/{s['subgraph_edges'].get('max')}"
          f"; flags {s['flags']}; gold reachable within hops {reach}")


def main():
  config = _CONFIG.value
  check_config(config)
  if _ON_BAD_LINE.value:
    config.data.on_bad_line = _ON_BAD_LINE.value
  report = prepare_lib.prepare(config, _DATA_DIR.value, _OUT_DIR.value,
                               progress=_PROGRESS.value)
  _print_report(report)
  figures = {k: v for k, v in report.items() if k != "splits"}
  figures["splits"] = {k: {kk: vv for kk, vv in v.items() if kk in (
      "questions", "labeled", "question_grounded", "choices_grounded",
      "gold_reachable_within_1_hops", "gold_reachable_within_2_hops",
      "gold_reachable_within_3_hops")} for k, v in report["splits"].items()}
  print(json.dumps(figures, sort_keys=True))


if __name__ == "__main__":
  entry_point.run(main)
