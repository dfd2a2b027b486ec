"""The trained explorer's token sequences: a prompt, then the response's
segments, each encoded on its own (the model's tokens as it wrote them, the
environment's observations as the rollout appends them), with the mask that
keeps the environment's tokens out of every loss.

``encode_episode`` gives ``(ids, loss_mask)`` of one episode; ``pad`` puts
rows into ``[B, T]`` arrays with the tokenizer's pad id (never a token of a
chat: tunix reads every pad-id token as padding).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from racer_jax.graphdancer.episode import Episode, user_prompt
from racer_jax.graphdancer.explorer import PASSAGE_SYSTEM, SYSTEM


def system_prompt(tools, passages: bool) -> str:
  """GraphDancer's instructions for the graph of ``tools`` (its relation
  names listed)."""
  template = PASSAGE_SYSTEM if passages else SYSTEM
  return template.format(relations=", ".join(tools.kg.relations))


def prompt_ids(tokenizer, system: str, question: str,
               choices: Sequence[str]) -> list[int]:
  """The prompt's token ids: the model's chat template over the system and
  user turns, ready for the assistant's reply (plain text without a
  template)."""
  user = user_prompt(question, choices)
  if tokenizer.chat_template:
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": system},
         {"role": "user", "content": user}])
  else:
    text = f"{system}\n\n{user}\n\n"
  return tokenizer.prefix() + tokenizer.encode(text)


def encode_episode(tokenizer, prompt: Sequence[int], episode: Episode,
                   end_of_turn: bool = True) -> tuple[list[int], list[int]]:
  """``(ids, loss_mask)`` of ``prompt`` and ``episode``'s segments: 1 on
  the model's tokens, 0 on the prompt's and the observations'. With
  ``end_of_turn``, an episode that answered ends with the EOS the model
  should write after its answer (a model token)."""
  ids, mask = list(prompt), [0] * len(prompt)
  for segment in episode.segments:
    seg = tokenizer.encode(segment.text)
    ids += seg
    mask += [int(segment.by_model)] * len(seg)
  if end_of_turn and episode.end == "answer" and \
      tokenizer.eos_id is not None:
    ids.append(tokenizer.eos_id)
    mask.append(1)
  return ids, mask


def pad(rows: Sequence[Sequence[int]], length: int, value: int) -> np.ndarray:
  """int32 ``[len(rows), length]``: each row, right-padded with ``value``
  (a longer row is refused)."""
  out = np.full((len(rows), length), value, np.int32)
  for i, row in enumerate(rows):
    if len(row) > length:
      raise ValueError(f"a sequence of {len(row)} tokens is longer than "
                       f"{length}")
    out[i, :len(row)] = row
  return out


# Padded sequence lengths: steps of at most 1.5x, so that padding wastes
# at most a third of a batch and a run compiles a handful of shapes.
LENGTH_BUCKETS = tuple(128 * k for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32,
                                         48, 64, 96, 128))


def length_bucket(n: int) -> int:
  """The smallest of :data:`LENGTH_BUCKETS` that holds ``n`` tokens."""
  for b in LENGTH_BUCKETS:
    if n <= b:
      return b
  raise ValueError(f"{n} tokens: longer than {LENGTH_BUCKETS[-1]}")
