"""The choice scorers by name: how ``--backend`` (and ``--lm_scoring``)
reach a model that can score.

- ``jax``: the model in this process (:mod:`racer_jax.lm.jax_scorer`;
  ``--model`` a GGUF file or a Hugging Face folder, default SmolLM2);
- ``echo``: an OpenAI-compatible ``/v1/completions`` that returns prompt
  log-probs (llama-cpp-python's server with ``logits_all``, vLLM);
- ``letters``: a chat API that shows only the next token's top log-probs
  (OpenAI): lettered options averaged over cyclic permutations.
"""

from __future__ import annotations

import os
from typing import Callable

from racer_jax.errors import ConfigError
from racer_jax.lm import causal_lm, jax_scorer, server_scorers
from racer_jax.lm.choice_scoring import ChoiceScorer


def _jax(model, base_url, api_key, **settings) -> ChoiceScorer:
  if base_url:
    raise ConfigError("--base_url does not apply to --backend=jax (the "
                      "model runs in this process)")
  return jax_scorer.JaxChoiceScorer(
      causal_lm.load_causal_lm(model, dtype=settings.get("dtype",
                                                         "float32")))


def _echo(model, base_url, api_key, **settings) -> ChoiceScorer:
  return server_scorers.CompletionsScorer(
      base_url, model or "default", api_key=api_key or os.environ.get(
          "OPENAI_API_KEY"), **settings)


def _letters(model, base_url, api_key, **settings) -> ChoiceScorer:
  if not model:
    raise ConfigError("--lm_scoring=letters needs --model")
  return server_scorers.ChatLetterScorer(
      model, base_url=base_url, api_key=api_key or os.environ.get(
          "OPENAI_API_KEY"), **settings)


SCORERS: dict[str, Callable[..., ChoiceScorer]] = {
    "jax": _jax, "echo": _echo, "letters": _letters}
# --backend -> the scorer it reaches by default
DEFAULT_SCORING = {"jax": "jax", "openai": "echo"}


def make_scorer(backend: str | None, scoring: str = "auto", *,
                model: str | None = None, base_url: str | None = None,
                api_key: str | None = None, **settings) -> ChoiceScorer:
  """The scorer ``backend`` reaches (``scoring``: ``auto`` or a name of
  :data:`SCORERS`)."""
  backend = backend or "jax"
  if scoring == "auto":
    if backend not in DEFAULT_SCORING:
      raise ConfigError(
          f"--backend={backend} cannot score choices: use --backend=jax "
          "(in process), or --backend=openai with a server that returns "
          "prompt log-probs (llama-cpp-python, vLLM)")
    scoring = DEFAULT_SCORING[backend]
  if scoring not in SCORERS:
    raise ConfigError(f"--lm_scoring={scoring}: one of auto, "
                      f"{', '.join(SCORERS)}")
  if (scoring == "jax") != (backend == "jax"):
    raise ConfigError(f"--lm_scoring={scoring} does not go with "
                      f"--backend={backend}")
  return SCORERS[scoring](model, base_url, api_key, **settings)
