r"""Answers one question with the four agents and shows the reasoning paths.

  python launch/answer.py --workdir=runs/csqa_answer \
      --question "Where would you put ice cream to keep it cold?" \
      --choices "oven,freezer,table,library,car"

``--workdir`` is an answer run (``--config.stage=answer`` with knowledge).
The shared memory starts from what training left (the answer run's memory
pass over the training split, when it made one); the critic judges with the
thresholds fitted on the run's validation slice (fitted here first if this
setup, e.g. an ``--ensemble``, has none stored yet). Prints the answer, its confidence, the critic's verdict per round and the
reasoning paths (chains and the sentences shown to the answerer);
``--format=json`` prints one JSON object instead; ``--plot=out.png`` draws
the paths (question concepts, paths with relation labels, the choices, the
chosen one marked).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402
import ml_collections  # noqa: E402

from configs import default as default_config  # noqa: E402
from racer_jax.agents.pipeline import Pipeline  # noqa: E402
from racer_jax.eval import calibration, plots  # noqa: E402

_WORKDIR = flags.DEFINE_string("workdir", None, "An answer run.",
                               required=True)
_QUESTION = flags.DEFINE_string("question", None, "The question.",
                                required=True)
_CHOICES = flags.DEFINE_list("choices", None, "Comma-separated choices.",
                             required=True)
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, "Data directory (default: $RACER_DATA_DIR).")
_FORMAT = flags.DEFINE_enum("format", "text", ["text", "json"],
                            "Output format.")
_BACKEND = flags.DEFINE_enum("backend", None, ["local", "gemini"],
                             "LLM backend (default: the run's config).")
_API_KEY = flags.DEFINE_string("api_key", None, "Gemini API key (default: "
                               "$GEMINI_API_KEY / $GOOGLE_API_KEY).")
_SEED = flags.DEFINE_integer("seed", 0, "Sampling seed.")
_ENSEMBLE = flags.DEFINE_list(
    "ensemble", [], "More answer runs trained on --workdir's triples and "
    "paths (their extra text may differ: each is shown its own); the "
    "AnswerAgent averages their choice probabilities.")
_RETRIEVAL = flags.DEFINE_string(
    "retrieval_workdir", None, "For an answer run trained without paths: "
    "the GraphAgent's refiner run (its paths back the critic and the "
    "evidence; the answerer keeps its own input).")
_DRY_RUN = flags.DEFINE_bool(
    "dry_run", False, "With --backend=gemini: print the prompts the agents "
    "would send (round 1 exactly; after it the local models stand in for "
    "the LLM's replies) and their token counts; nothing is sent.")
_PLOT = flags.DEFINE_string("plot", None, "Draw the reasoning paths to this "
                            "PNG (matplotlib).")


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  with open(os.path.join(_WORKDIR.value, "config.json"),
            encoding="utf-8") as f:
    saved = ml_collections.ConfigDict(json.load(f))
  agents = ml_collections.ConfigDict(default_config.get_config().agents)
  agents.update(saved.get("agents", {}))
  if _BACKEND.value:
    agents.backend = _BACKEND.value
  if _RETRIEVAL.value:
    agents.retrieval_workdir = _RETRIEVAL.value
  quiet = (lambda _: None)
  if _DRY_RUN.value and agents.backend == "local":
    raise app.UsageError("--dry_run shows what an LLM backend would be sent: "
                         "add --backend=gemini")
  pipeline = Pipeline(_WORKDIR.value, _DATA_DIR.value, agents=agents,
                      api_key=_API_KEY.value, ensemble=_ENSEMBLE.value,
                      dry_run=_DRY_RUN.value, log=quiet)
  if pipeline.critic is None:  # first use of this setup: fit it once
    print("calibrating the critic on the answer run's validation slice "
          "(once for this setup) ...", file=sys.stderr)
    pipeline.use_calibration(calibration.fit_critic(
        pipeline.stack, progress=False, log=quiet))
  result = pipeline.answer(_QUESTION.value, _CHOICES.value, seed=_SEED.value)
  if _DRY_RUN.value:
    recorded = pipeline.stack.backend.recorded
    prompts = [{"agent": r.agent, "system": r.system, "user": r.user,
                "input_tokens": n, "cached_or_repeated": cached}
               for r, n, cached in recorded]
    summary = {"dry_run": True, "llm_calls": len(prompts),
               "input_tokens": sum(p["input_tokens"] for p in prompts),
               "token_count": pipeline.stack.backend.token_count,
               "generate_calls_made": 0}
    if _FORMAT.value == "json":
      print(json.dumps({**summary, "prompts": prompts}))
      return
    for i, p in enumerate(prompts, 1):
      print(f"===== call {i}: {p['agent']} ({p['input_tokens']} input "
            f"tokens, {summary['token_count']}) =====\n[system] "
            f"{p['system']}\n[user]\n{p['user']}\n")
    print(json.dumps(summary))
    return
  if _FORMAT.value == "json":
    print(json.dumps({**result.to_dict(), "critic": pipeline.critic_source,
                      "llm": pipeline.usage.to_dict()}))
    return
  print(result.explain())
  if _PLOT.value:
    plots.reasoning_paths(result.to_dict(), _PLOT.value)
    print(f"reasoning paths drawn to {_PLOT.value}")


if __name__ == "__main__":
  app.run(main)
