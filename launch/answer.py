r"""Answers one question with the four agents and shows the reasoning paths.

  python launch/answer.py --workdir=runs/csqa_answer \
      --question "Where would you put ice cream to keep it cold?" \
      --choices "oven,freezer,table,library,car"

``--workdir`` is an answer run (``--config.stage=answer`` with knowledge).
Prints the answer, its confidence, the critic's verdict per round and the
reasoning paths (chains and the sentences shown to the answerer);
``--format=json`` prints one JSON object instead.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags, logging  # noqa: E402
import ml_collections  # noqa: E402

from configs import default as default_config  # noqa: E402
from racer_jax.agents import templates  # noqa: E402
from racer_jax.agents.pipeline import Pipeline  # noqa: E402

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
  quiet = (lambda _: None)
  pipeline = Pipeline(_WORKDIR.value, _DATA_DIR.value, agents=agents,
                      api_key=_API_KEY.value, log=quiet)
  result = pipeline.answer(_QUESTION.value, _CHOICES.value, seed=_SEED.value)
  if _FORMAT.value == "json":
    print(json.dumps({**result.to_dict(), "critic": pipeline.critic_source,
                      "llm": pipeline.usage.to_dict()}))
    return
  print(f"Q: {result.question}")
  for i, c in enumerate(result.choices):
    mark = "*" if i == result.prediction else " "
    print(f" {mark} {i}. {c}")
  print(f"answer: {result.choices[result.prediction]} "
        f"(confidence {result.confidence:.2f}; "
        f"{'accepted' if result.accepted else 'no consensus, fallback'} "
        f"in round {result.deciding_turn + 1})")
  for r in result.rounds:
    print(f"round {r.turn + 1} (temperature {r.temperature:.2f}): "
          f"{result.choices[r.answer.choice]} p={r.answer.confidence:.2f} "
          f"-> critic {r.verdict.verdict} ({r.verdict.reason})")
  print("reasoning paths for the answer:")
  if not result.evidence:
    print("  (none found: the answer rests on the question text alone)")
  for p in result.evidence:
    print(f"  {templates.chain(p.triples)}")
    print(f"    {templates.path_sentences(p.triples)}")
  print(f"rationale: {result.rounds[result.deciding_turn].answer.rationale}")


if __name__ == "__main__":
  app.run(main)
