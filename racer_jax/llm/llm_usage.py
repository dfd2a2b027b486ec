"""What a run's LLM calls cost and how they failed: :class:`UsageReport`.

Counts calls, cache hits, prompt / answer / thinking tokens, latency and
failures by category (``truncated``, ``blocked``, ``timeout``…), in all and
per agent (``answer``, ``critic``, ``template``, ``explorer``, ``mentor``…),
and the answers or verdicts that fell back to a stand-in. Cached replies
count as calls made but add no new tokens (``input_tokens`` …), so a re-run
reports 0 new tokens; ``tokens`` counts every reply, cached or not (the
method's cost per question, the same whatever the cache holds).
"""

from __future__ import annotations

import collections

_PER_AGENT = ("calls", "cache_hits", "tokens", "input_tokens",
              "output_tokens", "thinking_tokens", "errors", "fallbacks")


class UsageReport:

  def __init__(self):
    self.calls = 0
    self.cache_hits = 0
    self.tokens = 0  # every reply's, cached or not
    self.input_tokens = 0
    self.output_tokens = 0
    self.thinking_tokens = 0
    self.latencies: list[float] = []
    self.errors: collections.Counter = collections.Counter()
    self.fallbacks = 0
    self.per_agent: dict[str, collections.Counter] = {}
    self.agent_errors: dict[str, collections.Counter] = {}

  def _agent(self, agent: str) -> collections.Counter:
    return self.per_agent.setdefault(agent, collections.Counter())

  def record(self, reply, agent: str = "other"):
    """Adds one :class:`~racer_jax.llm.llm.LLMReply` made for
    ``agent``."""
    mine = self._agent(agent)
    self.calls += 1
    mine["calls"] += 1
    self.tokens += reply.total_tokens
    mine["tokens"] += reply.total_tokens
    if reply.cache_hit:
      self.cache_hits += 1
      mine["cache_hits"] += 1
    else:
      for name in ("input_tokens", "output_tokens", "thinking_tokens"):
        n = int(getattr(reply, name, 0) or 0)
        setattr(self, name, getattr(self, name) + n)
        mine[name] += n
      self.latencies.append(reply.latency_s)
    if reply.error:
      self.errors[reply.error] += 1
      mine["errors"] += 1
      self.agent_errors.setdefault(agent, collections.Counter())[
          reply.error] += 1

  def invalid(self, category: str, agent: str):
    """A reply the API delivered but the agent could not use (e.g. a
    choice index that is not one of the question's)."""
    self.errors[category] += 1
    self._agent(agent)["errors"] += 1
    self.agent_errors.setdefault(agent, collections.Counter())[category] += 1

  def fallback(self, agent: str = "other", n: int = 1):
    """``n`` answers or verdicts that fell back to the local models."""
    self.fallbacks += n
    self._agent(agent)["fallbacks"] += n

  def to_dict(self) -> dict:
    return {"llm_calls": self.calls, "llm_cache_hits": self.cache_hits,
            "llm_new_calls": self.calls - self.cache_hits,
            "tokens": self.tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "thinking_tokens": self.thinking_tokens,
            "llm_errors": dict(self.errors), "fallbacks": self.fallbacks,
            "per_agent": {a: {**{k: int(c[k]) for k in _PER_AGENT},
                              "errors_by_category": dict(
                                  self.agent_errors.get(a, {}))}
                          for a, c in sorted(self.per_agent.items())}}

  def summary(self) -> str:
    """One human-readable line (fallbacks always said)."""
    if not self.calls:
      return "LLM: no calls"
    agents = "; ".join(
        f"{a} {c['calls']} calls ({c['cache_hits']} cached, "
        f"{c['fallbacks']} fell back to the local models)"
        for a, c in sorted(self.per_agent.items()))
    errors = (", errors " + ", ".join(f"{k} ×{v}" for k, v in
                                      sorted(self.errors.items()))
              if self.errors else "")
    return (f"LLM: {self.calls} calls, {self.input_tokens} tokens in / "
            f"{self.output_tokens} out / {self.thinking_tokens} thinking "
            f"(new), {agents}{errors}")
