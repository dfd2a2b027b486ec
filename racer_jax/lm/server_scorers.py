"""Choice scorers behind OpenAI-compatible servers.

:class:`CompletionsScorer` reads each continuation's log-likelihood from
``/v1/completions`` by one of two protocols:

- ``echo`` (vLLM and other servers that echo prompt log-probs): prompt =
  context + continuation, ``echo=True, logprobs=1, max_tokens=1``; the
  continuation's tokens run from the end of the context, its trailing
  spaces removed (they move to the continuation, as in
  :func:`racer_jax.lm.jax_scorer.split_tokens`), to the end of the prompt
  (a token straddling that boundary counts as the continuation's).
- ``next_token`` (llama-cpp-python's server: ``auto`` picks it where
  ``/extras/tokenize`` answers): that server's echo pairs each token with
  the next position's log-prob when the model adds no BOS token
  (abetlen/llama-cpp-python#1983) and sorts the vocabulary once per echoed
  token. Instead each continuation token is forced as the one generated
  token (``logit_bias`` +100 leaves the reported log-probs alone) after
  the context and the continuation's earlier tokens, one cheap request each.

A server that cannot score is refused in one :class:`ConfigError` line at
the first call: llama.cpp's ``llama-server`` (500 "Only no echo is
supported"), llama-cpp-python's server without ``--logits_all true`` (500
"logprobs is not supported for models created with logits_all=False"), a
reply without log-probs, a misaligned echo.

:class:`ChatLetterScorer` serves chat APIs that show only the first
generated token's top log-probs (OpenAI: ``top_logprobs`` <= 20): each
choice is scored by its letter's log-prob, averaged over the cyclic
permutations of the lettered options.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import threading
from typing import Callable, Sequence

import numpy as np
import openai
from tqdm.auto import tqdm

from racer_jax.errors import ConfigError, LLMError
from racer_jax.lm.choice_scoring import (ContinuationScore, ScoreRequest,
                                         characters)

KEY_VARIABLE = "OPENAI_API_KEY"
OPENAI_ENDPOINT = "https://api.openai.com/v1"
PROTOCOLS = ("auto", "echo", "next_token")
PERMUTATIONS = ("cyclic", "none")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
FORCE_BIAS = 100.0
INSTRUCTION = "Answer with the letter of the correct option only."
_NO_KEY = "no-key-needed"  # the SDK wants a string; local servers ignore it
_INSTEAD = ("serve the model with vLLM or llama-cpp-python's server "
            "(python -m llama_cpp.server --model FILE --logits_all true), or "
            "score it in process")
# (text of the server's error, what it means, what to do instead)
_REFUSALS = (("Only no echo is supported",
              "is llama.cpp's llama-server, which gives no prompt log-probs",
              _INSTEAD),
             ("logits_all=False",
              "is llama-cpp-python's server with the model loaded without "
              "logits_all", "restart it with --logits_all true"))


def make_client(base_url: str | None, api_key: str | None = None,
                timeout_s: float = 120.0, attempts: int = 3) -> openai.OpenAI:
  """An OpenAI client: ``attempts`` tries (the SDK retries 408, 409, 429,
  5xx, lost connections); the key: ``api_key``, else ``OPENAI_API_KEY``."""
  key = api_key or os.environ.get(KEY_VARIABLE)
  if not key and not base_url:
    raise ConfigError("OpenAI needs an API key: set OPENAI_API_KEY or pass "
                      "api_key (or give the base_url of your own server)")
  return openai.OpenAI(api_key=key or _NO_KEY,
                       base_url=(base_url or OPENAI_ENDPOINT).rstrip("/"),
                       timeout=timeout_s, max_retries=max(0, attempts - 1))


def _error_text(exc: openai.APIStatusError) -> str:
  body = exc.body
  if isinstance(body, dict):
    body = body.get("error", body)
    body = body.get("message", body) if isinstance(body, dict) else body
  return " ".join(str(body if body is not None else exc.message).split())[:300]


class _ServerScorer:
  """Calls, their errors and their concurrency, shared by both scorers."""

  def __init__(self, model: str, base_url: str | None, api_key, timeout_s,
               attempts, max_concurrency, client):
    if not model:
      raise ConfigError("a server scorer needs the name the model is served as")
    self.model = model
    self._client = client or make_client(base_url, api_key, timeout_s,
                                         attempts)
    self.base_url = str(self._client.base_url).rstrip("/")
    self._once = self._client.with_options(max_retries=0)
    self.max_concurrency = max(1, int(max_concurrency))
    self.calls = 0
    self._checked = False
    self._lock = threading.Lock()

  def _call(self, fn: Callable, client=None):
    """``fn(client)``; a refusal as ConfigError, other failures LLMError."""
    with self._lock:
      self.calls += 1
    try:
      return fn(client or self._client)
    except openai.APIStatusError as exc:
      text = _error_text(exc)
      for needle, meaning, instead in _REFUSALS:
        if needle in text:
          raise ConfigError(f"{self.base_url} {meaning} (it answered "
                            f"{exc.status_code} {text!r}): {instead}"
                            ) from None
      error = LLMError(f"{self.base_url} answered {exc.status_code}: {text}")
      error.status = exc.status_code
      raise error from None
    except openai.APIConnectionError as exc:  # timeouts included
      raise LLMError(f"{self.base_url}: {type(exc).__name__}: "
                     f"{' '.join(str(exc).split())[:200]}") from None

  def _first(self, fn: Callable):
    """The first call: unretried (a refusal shows at once), then retried."""
    try:
      return self._call(fn, self._once)
    except LLMError:
      return self._call(fn)

  def _run(self, items: list, work: Callable, progress: bool, desc: str
           ) -> list:
    """``work(item, call)`` for each item, ``max_concurrency`` at once; the
    very first alone (a refusal stops the rest from being sent)."""
    out, start = [None] * len(items), 0
    with tqdm(total=len(items), desc=desc, unit="item", leave=False,
              disable=not progress) as bar:
      if items and not self._checked:
        out[0], start = work(items[0], self._first), 1
        self._checked = True
        bar.update(1)
      pool = concurrent.futures.ThreadPoolExecutor(self.max_concurrency)
      futures = {pool.submit(work, items[i], self._call): i
                 for i in range(start, len(items))}
      try:
        for future in concurrent.futures.as_completed(futures):
          out[futures[future]] = future.result()
          bar.update(1)
      finally:   # on a failure, what has not started is not sent
        pool.shutdown(wait=True, cancel_futures=True)
    return out


class CompletionsScorer(_ServerScorer):
  """:class:`racer_jax.lm.choice_scoring.ChoiceScorer` on an
  OpenAI-compatible ``/v1/completions`` (module docstring).

  ``protocol``: ``auto``, ``echo`` or ``next_token``. Counters:
  ``forced_tokens`` (next-token requests), ``retokenized`` (forced
  prefixes the server tokenized otherwise than the split),
  ``text_mismatches`` (forced texts that were not the continuation)."""

  def __init__(self, base_url: str, model: str, *, api_key: str | None = None,
               timeout_s: float = 120.0, attempts: int = 3,
               max_concurrency: int = 1, protocol: str = "auto",
               client: openai.OpenAI | None = None):
    if protocol not in PROTOCOLS:
      raise ConfigError(f"protocol={protocol!r}: expected one of "
                        f"{list(PROTOCOLS)}")
    if not base_url and client is None:
      raise ConfigError("CompletionsScorer needs the server's base_url "
                        "(e.g. http://127.0.0.1:8000/v1)")
    super().__init__(model, base_url, api_key, timeout_s, attempts,
                     max_concurrency, client)
    self.name, self.protocol = f"completions:{model}@{self.base_url}", protocol
    self.forced_tokens = self.retokenized = self.text_mismatches = 0
    self._bos: list[int] | None = None   # what the tokenizer puts first
    self._forced_ok = False
    self._root = self.base_url.removesuffix("/v1")  # where /extras lives

  def _tokenize(self, call, text: str) -> list[int]:
    reply = call(lambda c: c.with_options(base_url=self._root).post(
        "/extras/tokenize", body={"input": text}, cast_to=object))
    tokens = reply.get("tokens") if isinstance(reply, dict) else None
    if not isinstance(tokens, list):
      raise LLMError(f"{self._root}/extras/tokenize answered {reply!r:.80}")
    return [int(t) for t in tokens]

  def _resolve(self):
    """``auto``: ``next_token`` where llama-cpp-python's tokenizer answers
    (also learning what it puts first: a BOS or nothing)."""
    if self.protocol == "echo" or self._bos is not None:
      return
    try:
      self._bos = self._tokenize(self._first, "")
      self.protocol = "next_token"
    except LLMError as exc:
      if getattr(exc, "status", None) not in (404, 405):
        raise                              # unreachable, a bad key, ...
      if self.protocol == "next_token":
        raise ConfigError(f"protocol='next_token' needs llama-cpp-python's "
                          f"{self._root}/extras/tokenize: {exc}") from None
      self.protocol = "echo"

  def _no_logprobs(self, what: str) -> ConfigError:
    return ConfigError(f"{self.base_url} returned no log-probs for {what}: "
                       f"it cannot score continuations; {_INSTEAD}")

  def _echo(self, call, context: str, continuation: str
            ) -> ContinuationScore:
    prompt = context + continuation
    reply = call(lambda c: c.completions.create(
        model=self.model, prompt=prompt, echo=True, logprobs=1, max_tokens=1,
        temperature=0.0))
    choice = reply.choices[0] if reply.choices else None
    lp = getattr(choice, "logprobs", None)
    text = getattr(choice, "text", None) or ""
    if (lp is None or not lp.tokens or lp.token_logprobs is None
        or lp.text_offset is None or not text.startswith(prompt)):
      raise self._no_logprobs("the echoed prompt (echo=True, logprobs=1)")
    offsets = [int(o) for o in lp.text_offset]
    ends = offsets[1:] + [offsets[-1] + len(lp.tokens[-1])]
    origin = ends[-1] - len(text)    # vLLM counts a BOS's text, e.g. "<s>"
    if origin < 0:  # the generated token is missing: all are shifted by one
      raise ConfigError(f"{self.base_url} pairs each echoed token with the "
                        f"next position's log-prob (llama-cpp-python's server "
                        f"on a model without a BOS token, abetlen/llama-cpp-"
                        f"python#1983): use protocol='next_token' there")
    start = origin + len(context.rstrip(" "))
    end = origin + len(prompt)
    picked = [v for o, e, v in zip(offsets, ends, lp.token_logprobs)
              if o < end and (o >= start or e > start)]
    if not picked or any(v is None for v in picked):
      raise ValueError(f"no log-prob for the continuation {continuation!r} "
                       f"after {context[-40:]!r}")
    return ContinuationScore(float(sum(picked)), len(picked),
                             characters(continuation))

  def _next_token(self, call, context: str, continuation: str
                  ) -> ContinuationScore:
    stripped = context.rstrip(" ")
    tail = context[len(stripped):] + continuation
    ctx = self._tokenize(call, stripped)
    whole = self._tokenize(call, stripped + tail)
    ids = (whole[len(ctx):] if whole[:len(ctx)] == ctx else
           self._tokenize(call, tail)[len(self._bos or []):])
    total, prefix = 0.0, stripped
    for j, token in enumerate(ids):
      reply = call(lambda c, p=prefix, t=token: c.completions.create(
          model=self.model, prompt=p, max_tokens=1, logprobs=1,
          temperature=0.0, logit_bias={str(t): FORCE_BIAS}))
      choice = reply.choices[0] if reply.choices else None
      lp = getattr(choice, "logprobs", None)
      if lp is None or not lp.token_logprobs or lp.token_logprobs[0] is None:
        raise self._no_logprobs("a generated token (logprobs=1)")
      total += float(lp.token_logprobs[0])
      prefix += choice.text or ""
      used = getattr(reply.usage, "prompt_tokens", None)
      with self._lock:
        self.forced_tokens += 1
        self.retokenized += used is not None and used != len(ctx) + j
    with self._lock:
      if prefix == stripped + tail:
        self._forced_ok = True
      elif not self._forced_ok:
        raise ConfigError(f"{self.base_url} generated {prefix[-40:]!r}, not "
                          f"the forced {tail!r}: it does not honour "
                          f"logit_bias; use protocol='echo'")
      else:
        self.text_mismatches += 1
    return ContinuationScore(total, len(ids), characters(continuation))

  def score_many(self, requests: Sequence[ScoreRequest], *,
                 progress: bool = False) -> list[list[ContinuationScore]]:
    """Every request's continuations scored, in order (one call, or one
    per continuation token, per continuation)."""
    items = []
    for r, q in enumerate(requests):
      if q.continuations and not q.context.strip(" "):
        raise ValueError(f"request {r}: an empty context (a server gives no "
                         f"log-prob for a prompt's first token)")
      for k, continuation in enumerate(q.continuations):
        if not continuation:
          raise ValueError(f"request {r}: an empty continuation")
        items.append((r, k))
    if items:
      self._resolve()
    score = self._next_token if self.protocol == "next_token" else self._echo

    def work(item, call):
      q = requests[item[0]]
      return score(call, q.context, q.continuations[item[1]])
    flat = iter(self._run(items, work, progress, "scoring"))
    return [[next(flat) for _ in q.continuations] for q in requests]


# -- chat: the letters' log-probs --------------------------------------------
def option_orders(count: int, permutations: str = "cyclic") -> list[list[int]]:
  """``orders[k][p]``: the choice shown at position ``p`` (letter
  ``LETTERS[p]``) in permutation ``k``; cyclic: choice ``(p + k) % count``,
  each choice once in each position."""
  if permutations == "none":
    return [list(range(count))]
  return [[(p + k) % count for p in range(count)] for k in range(count)]


def letter_prompt(context: str, options: Sequence[str]) -> str:
  """The chat message: the context, the lettered options, the instruction."""
  lines = [f"{LETTERS[p]}. {o.strip()}" for p, o in enumerate(options)]
  return f"{context.strip()}\n\n" + "\n".join(lines) + f"\n\n{INSTRUCTION}"


def letter_logprobs(top: Sequence[tuple[str, float]], count: int
                    ) -> tuple[np.ndarray, int]:
  """The first ``count`` letters' log-probs (count,) from the first token's
  top ``(token, logprob)``: leading-space and lower-case variants merged
  (logsumexp); a letter not listed gets the smallest listed log-prob -
  log 2 (an upper bound). Also how many were not listed."""
  floor = min(v for _, v in top) - math.log(2.0)
  found: dict[str, list[float]] = {}
  for token, value in top:
    key = token.lstrip().upper()
    if len(key) == 1 and key in LETTERS[:count]:
      found.setdefault(key, []).append(float(value))
  out = np.full((count,), floor, np.float64)
  for p, letter in enumerate(LETTERS[:count]):
    if letter in found:
      out[p] = np.logaddexp.reduce(found[letter])
  return out, count - len(found)


class ChatLetterScorer(_ServerScorer):
  """:class:`racer_jax.lm.choice_scoring.ChoiceScorer` on a chat API:
  ``logprob`` = the choice's letter log-prob averaged over the
  permutations, ``tokens`` = ``chars`` = 1 (``acc`` = ``acc_norm``).
  ``absent_letters``: letters not in the top log-probs (given the bound)."""

  def __init__(self, model: str, *, base_url: str | None = None,
               api_key: str | None = None, timeout_s: float = 120.0,
               attempts: int = 3, max_concurrency: int = 1,
               permutations: str = "cyclic", top_logprobs: int = 20,
               client: openai.OpenAI | None = None):
    if permutations not in PERMUTATIONS:
      raise ConfigError(f"permutations={permutations!r}: expected one of "
                        f"{list(PERMUTATIONS)}")
    super().__init__(model, base_url, api_key, timeout_s, attempts,
                     max_concurrency, client)
    self.name = f"chat-letters:{model}@{self.base_url}"
    self.permutations, self.top_logprobs = permutations, int(top_logprobs)
    self.absent_letters = self.letters_read = 0
    self._cap = ("max_completion_tokens" if base_url is None and client is None
                 else "max_tokens")   # OpenAI itself wants the former

  def _letters(self, call, context: str, options: Sequence[str]
               ) -> np.ndarray:
    kwargs = {"model": self.model, "temperature": 0.0, "logprobs": True,
              "top_logprobs": self.top_logprobs, self._cap: 1,
              "messages": [{"role": "user",
                            "content": letter_prompt(context, options)}]}
    reply = call(lambda c: c.chat.completions.create(**kwargs))
    choice = reply.choices[0] if reply.choices else None
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    top = getattr(content[0], "top_logprobs", None) if content else None
    if not top:
      raise ConfigError(f"{self.base_url} returned no top log-probs "
                        f"(logprobs=True, top_logprobs={self.top_logprobs}): "
                        f"it cannot score choices by their letters")
    values, absent = letter_logprobs([(t.token, t.logprob) for t in top],
                                     len(options))
    with self._lock:
      self.absent_letters += absent
      self.letters_read += len(options)
    return values

  def score_many(self, requests: Sequence[ScoreRequest], *,
                 progress: bool = False) -> list[list[ContinuationScore]]:
    """Every request's choices scored, in order (a call a permutation)."""
    items = []
    for r, q in enumerate(requests):
      if len(q.continuations) > len(LETTERS):
        raise ValueError(f"request {r}: more than {len(LETTERS)} choices")
      orders = option_orders(len(q.continuations), self.permutations)
      items += [(r, order) for order in orders if order]

    def work(item, call):
      q = requests[item[0]]
      return self._letters(call, q.context,
                           [q.continuations[i] for i in item[1]])
    results = self._run(items, work, progress, "letters")
    sums = [np.zeros(len(q.continuations)) for q in requests]
    counts = [0] * len(requests)
    for (r, order), values in zip(items, results):
      sums[r][order] += values          # position p scores choice order[p]
      counts[r] += 1
    return [[ContinuationScore(float(v / max(counts[r], 1)), 1, 1)
             for v in sums[r]] for r in range(len(requests))]
