"""Either LLM backend against its stub, for the agents' tests that must
work the same with both client conventions (``KINDS``):
``stub_backend(kind, respond)`` yields ``(stub, backend)`` where
``respond(system, user) -> text`` makes every reply."""

import contextlib
import json

from racer_jax.llm import gemini_backend, openai_backend
from tests.llm import stub_gemini, stub_openai

KINDS = ("gemini", "openai")


def _gemini_request(req) -> tuple[str, str]:
  return (json.dumps(req.get("systemInstruction", {})),
          stub_gemini.prompt_text(req))


def _openai_request(req) -> tuple[str, str]:
  system = "".join(m.get("content", "") for m in req.get("messages", [])
                   if m.get("role") == "system")
  return system, stub_openai.user_text(req)


@contextlib.contextmanager
def stub_backend(kind: str, respond=lambda system, user: "ok", **kwargs):
  kwargs = {"initial_delay_s": 0.01, "max_delay_s": 0.02, **kwargs}
  if kind == "gemini":
    with stub_gemini.StubGemini(
        lambda req: respond(*_gemini_request(req))) as stub:
      yield stub, gemini_backend.GeminiBackend("m", api_key="k",
                                               base_url=stub.url, **kwargs)
  else:
    with stub_openai.StubOpenAI(
        lambda req: respond(*_openai_request(req)), models=["m"]) as stub:
      yield stub, openai_backend.OpenAIBackend("m", base_url=stub.url,
                                               **kwargs)


def fault(kind: str, what: str):
  """A script item for the stub of ``kind``: ``server_error`` (a 500) or
  ``empty`` (a reply without text)."""
  if what == "server_error":
    body = (stub_gemini.error_body(500, "INTERNAL") if kind == "gemini"
            else stub_openai.error(500, "x", "server_error"))
    return (500, body, 0)
  body = ({"candidates": []} if kind == "gemini"
          else stub_openai.completion(""))
  return (200, body, 0)
