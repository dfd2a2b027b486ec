"""Which LLM answered an evaluation, and how much of it: the figures every
report, printed summary and JSON line carries, so an accuracy is never
taken for an LLM's when a stand-in gave the answers.

``llm_answered_fraction`` is the share of final answers (the full system's
deciding round, over seeds) the LLM gave; the rest fell back to the local
model after a failed call. ``llm_answered_fraction_answer`` and
``_critic`` are the same per seat, over every call it made. When the
weakest of them is below ``agents.min_llm_answered`` (default 0.98) the
report's first line says the result is not an LLM's, and ``--require_llm``
makes it an error exit once the records are saved.
"""

from __future__ import annotations

import re

from racer_jax.errors import LLMError


def folder_suffix(identity: dict | None, agents) -> str:
  """What an evaluation folder's name adds for its LLM, so that runs with
  other models or prompts sit beside each other: ``.openai-smollm2``,
  ``.gemini-gemini-3.5-flash.no_paths``, ``.jax-smollm2.score_acc_norm``
  (``agents.answer_mode=score``); empty for the local models."""
  if not identity:
    return ""
  model = re.sub(r"[^A-Za-z0-9._-]+", "_", str(identity.get("model")))
  suffix = f".{identity['backend']}-{model}"
  if agents.answer_mode == "score":
    suffix += f".score_{agents.score_metric}"
  return suffix + ("" if agents.show_paths else ".no_paths")


def llm_figures(identity: dict | None, usage: dict, answered, agents,
                seats: dict | None = None) -> dict:
  """The LLM part of an evaluation's figures. ``usage``: the run's
  :class:`~racer_jax.llm.llm_usage.UsageReport` as a dict;
  ``answered``: ``llm_answered_fraction`` (None without an LLM);
  ``seats``: seat -> the share of its calls the LLM answered (None: the
  seat made none). The result is an LLM's when the weakest share reaches
  ``agents.min_llm_answered``."""
  identity = identity or {}
  minimum = float(agents.min_llm_answered)
  seats = {k: v for k, v in (seats or {}).items() if v is not None}
  shares = [answered] + list(seats.values()) if answered is not None else []
  weakest = min(shares) if shares else None
  out = {"backend": identity.get("backend", "local"),
         "model": identity.get("model"),
         "base_url": identity.get("base_url"),
         "llm_settings": identity.get("settings"),
         "llm_errors": dict(usage.get("llm_errors", {})),
         "min_llm_answered": minimum,
         "llm_answered_fraction": answered,
         "llm_seat_fractions": seats,
         "llm_weakest_fraction": weakest,
         "llm_result": None if not identity else bool(
             weakest is not None and weakest >= minimum)}
  out["llm_headline"] = headline(out)
  return out


def headline(figures: dict) -> str | None:
  """One line: who answered and how much (None without an LLM)."""
  if figures.get("llm_result") is None:
    return None
  who = (f"{figures['backend']} model `{figures['model']}` at "
         f"{figures['base_url']}")
  share = figures.get("llm_answered_fraction") or 0.0
  errors = ", ".join(f"{k} ×{v}" for k, v in
                     sorted(figures.get("llm_errors", {}).items()))
  failed = f" (failed calls: {errors})" if errors else ""
  seats = "".join(f", {v:.1%} of the {k} calls" for k, v in
                  sorted(figures.get("llm_seat_fractions", {}).items()))
  if figures["llm_result"]:
    return (f"LLM result: {who} gave {share:.1%} of the final answers"
            f"{seats}{failed}.")
  return (f"NOT AN LLM RESULT: {who} gave {share:.1%} of the final "
          f"answers{seats} (the weakest below agents.min_llm_answered="
          f"{figures['min_llm_answered']}); the rest came from the local "
          f"models{failed}.")


def require_llm(figures: dict) -> None:
  """``--require_llm``: LLMError when the LLM gave too few answers (the
  records and report are already written)."""
  if figures.get("llm_result") is False:
    raise LLMError(figures["llm_headline"] + " (--require_llm; the records "
                   "and report are saved)")
  if figures.get("llm_result") is None and not figures.get("dry_run"):
    raise LLMError("--require_llm: this evaluation used no LLM (backend "
                   "local)")
