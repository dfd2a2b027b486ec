r"""Answers one question with the four agents and shows the reasoning paths
(:mod:`racer_jax.eval.answer_one`).

  python launch/answer.py --workdir=runs/demo/answer \
      --question "Where would you put ice cream to keep it cold?" \
      --choices "oven,freezer,table,library,car"

``--workdir`` is an answer run. Prints the answer, its confidence, the
critic's verdicts and the reasoning paths (``--format=json``: one JSON
object; ``--plot=out.png``: a drawing; ``--dry_run``: the LLM's prompts).
"""

import json
import sys

from absl import flags, logging

from racer_jax import entry_point
from racer_jax.eval import answer_one, plots
from racer_jax.runs import registry

_WORKDIR = flags.DEFINE_string("workdir", None, "An answer run.", required=True)
_QUESTION = flags.DEFINE_string("question", None, "The question.",
                                required=True)
_CHOICES = flags.DEFINE_list("choices", None, "Comma-separated choices.",
                             required=True)
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_FORMAT = flags.DEFINE_enum("format", "text", ["text", "json"],
                            "Output format.")
_BACKEND = flags.DEFINE_enum("backend", None, registry.LLM_BACKENDS.names(),
                             "LLM backend (default: the run's config).")
_MODEL = flags.DEFINE_string("model", None, "LLM model name.")
_BASE_URL = flags.DEFINE_string("base_url", None, "LLM endpoint URL.")
_LLM_SETTING = flags.DEFINE_list("llm_setting", [], "agents.FIELD=VALUE "
                                 "for the LLM (see launch/evaluate.py).")
_API_KEY = flags.DEFINE_string("api_key", None, "API key (default: "
                               "$GEMINI_API_KEY / $OPENAI_API_KEY).")
_SEED = flags.DEFINE_integer("seed", 0, "Sampling seed.")
_ENSEMBLE = flags.DEFINE_list(
    "ensemble", [], "More answer runs trained on --workdir's triples and "
    "paths; the AnswerAgent averages their choice probabilities.")
_RETRIEVAL = flags.DEFINE_string(
    "retrieval_workdir", None, "For an answer run trained without paths: "
    "the GraphAgent's refiner run.")
_DRY_RUN = flags.DEFINE_bool(
    "dry_run", False, "With an LLM backend: print the prompts the agents "
    "would send and their token counts; nothing is sent.")
_PLOT = flags.DEFINE_string("plot", None, "Draw the paths to this PNG.")


def main():
  logging.set_verbosity(logging.WARNING)
  choices = answer_one.checked_choices(_QUESTION.value, _CHOICES.value)
  pipeline = answer_one.open_pipeline(
      _WORKDIR.value, _DATA_DIR.value, backend=_BACKEND.value,
      model=_MODEL.value, base_url=_BASE_URL.value,
      llm_settings=_LLM_SETTING.value,
      retrieval_workdir=_RETRIEVAL.value, api_key=_API_KEY.value,
      ensemble=_ENSEMBLE.value, dry_run=_DRY_RUN.value,
      log=lambda m: print(m, file=sys.stderr))
  result = pipeline.answer(_QUESTION.value, choices, seed=_SEED.value)
  if _DRY_RUN.value:
    record = answer_one.dry_run_record(pipeline)
    if _FORMAT.value == "text":
      print(answer_one.dry_run_text(record))
      record.pop("prompts")
    print(json.dumps(record))
  elif _FORMAT.value == "json":
    print(json.dumps({**result.to_dict(), "critic": pipeline.critic_source,
                      "llm": pipeline.usage.to_dict()}))
  else:
    print(answer_one.answer_text(result, pipeline))
  if _PLOT.value:
    plots.reasoning_paths(result.to_dict(), _PLOT.value)
    print(f"reasoning paths drawn to {_PLOT.value}", file=sys.stderr)


if __name__ == "__main__":
  entry_point.run(main)
