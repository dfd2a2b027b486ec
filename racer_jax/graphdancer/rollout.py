"""Batched episodes of the explorer LM: every question still running takes
its next step together.

Each turn, the running episodes' token sequences (prompt, then the
response so far: the model's sampled tokens and the observations' tokens)
go to tunix's sampler as one batch (:meth:`racer_jax.lm.generation.
Generator.generate_ids`, temperature sampling or greedy); each continuation
is cut after the first ``</graph>`` or ``</answer>`` (Search-R1's stop
strings, applied to the sampled tokens), the cut step goes to the
:class:`~racer_jax.graphdancer.episode.Environment` (the host-side tool
call), and the observation's tokens are appended with loss mask 0. An
episode ends when it answers, after ``max_turns`` steps, or when its next
step could overflow ``max_context_tokens`` (``end="length"``).

The result keeps, per episode, the exact token ids the policy produced and
read (:class:`Trajectory`), which the policy-gradient update scores again.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import tqdm

from racer_jax.errors import bars_off
from racer_jax.graphdancer.episode import STEP_ENDS, Environment, Episode
from racer_jax.graphdancer.inputs import prompt_ids, system_prompt
from racer_jax.lm import generation


@dataclasses.dataclass
class Trajectory:
  """An episode and its tokens: ``ids`` = prompt + response, ``mask`` 1
  on the tokens the model sampled (0 on the prompt and observations)."""
  episode: Episode
  prompt_length: int
  ids: list[int]
  mask: list[int]


def cut_step(tokenizer, ids: Sequence[int]) -> list[int]:
  """The sampled ids up to the token that completes the first step end
  (all of them when none does)."""
  text = ""
  for k in range(len(ids)):
    text = tokenizer.decode(ids[:k + 1])
    if any(end in text for end in STEP_ENDS):
      return list(ids[:k + 1])
  return list(ids)


def token_shortener(tokenizer, cap: int) -> Callable[[str], str]:
  """Cuts an observation to its first ``cap`` tokens (0: no cap)."""
  def shorten(text: str) -> str:
    if cap <= 0:
      return text
    ids = tokenizer.encode(text)
    return text if len(ids) <= cap else tokenizer.decode(ids[:cap]) + " …"
  return shorten


class Rollout:
  """Runs episodes of ``lm`` in ``env`` (whose ``shorten`` should be a
  :func:`token_shortener` of the observation cap)."""

  def __init__(self, lm, env: Environment, system: str, *,
               max_step_tokens: int, max_context_tokens: int, model=None):
    """``model``: the policy module sampled (PPO's actor, trained in place
    between rollouts); default ``lm``'s weights."""
    self.lm, self.env, self.system = lm, env, system
    self.max_step_tokens = int(max_step_tokens)
    self.max_context_tokens = int(max_context_tokens)
    self.generator = generation.Generator(lm, max_new_tokens=max_step_tokens,
                                          model=model)

  def start(self, question: str, choices: Sequence[str],
            golds: Sequence[str]) -> Trajectory:
    prompt = prompt_ids(self.lm.tokenizer, self.system, question, choices)
    return Trajectory(Episode(question, list(choices), list(golds)),
                      len(prompt), list(prompt), [0] * len(prompt))

  def run(self, questions, *, temperature: float = 0.0, seed: int = 0,
          progress: bool = False) -> list[Trajectory]:
    """``questions``: ``(question, choices, golds)``; one
    :class:`Trajectory` each, in order."""
    runs = [self.start(q, c, g) for q, c, g in questions]
    tok = self.lm.tokenizer
    with tqdm.tqdm(total=self.env.max_turns, desc="explorer turns",
                   disable=not progress or bars_off()) as bar:
      for turn in range(self.env.max_turns):
        active = [r for r in runs if not r.episode.done]
        for r in active:
          if len(r.ids) + self.max_step_tokens > self.max_context_tokens:
            r.episode.end = "length"
        active = [r for r in active if not r.episode.done]
        if not active:
          break
        sampled = self.generator.generate_ids(
            [r.ids for r in active], temperature=temperature,
            seed=seed * 1009 + turn)
        for r, ids in zip(active, sampled):
          step = cut_step(tok, ids)
          r.ids += step
          r.mask += [1] * len(step)
          observation = self.env.observe(r.episode, tok.decode(step))
          if observation is not None:
            obs = tok.encode(observation)
            r.ids += obs
            r.mask += [0] * len(obs)
        bar.update()
    return runs


def environment(config, tools, tokenizer) -> tuple[Environment, str]:
  """``(the environment over tools, the system prompt)`` of ``config``."""
  g = config.graphdancer
  env = Environment(tools, g.max_turns,
                    token_shortener(tokenizer, g.max_observation_tokens))
  return env, system_prompt(tools, passages=g.graph == "passages")
