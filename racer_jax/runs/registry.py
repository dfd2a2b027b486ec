"""Implementations chosen by name in the config, registered in one place.

A :class:`Registry` maps the names a config field accepts to what they
build. An entry is the implementation itself or its ``"module:attribute"``
path, imported when first used (HELM registers its clients by class path the
same way), so this low layer — and :mod:`racer_jax.runs.config_checks`,
which refuses an unknown name before any work — lists the names without
importing the rooms that implement them. Adding one is one line, anywhere
before the config is checked (a test file may register its own)::

    registry.LLM_BACKENDS.register("mine", "my_package.my_backend:MyBackend")

The config field's choices, the launchers' flag choices and the error
messages all read :meth:`Registry.names`.
"""

from __future__ import annotations

import importlib

from racer_jax.errors import ConfigError


class Registry:
  """Names a config ``field`` accepts -> implementations (``what``: what
  one is, for messages)."""

  def __init__(self, field: str, what: str):
    self.field, self.what = field, what
    self._entries: dict[str, object] = {}

  def register(self, name: str, target, *, replace: bool = False) -> None:
    """``target``: the implementation, its ``"module:attribute"`` path, or
    None (a name that builds nothing). A name is registered once unless
    ``replace``."""
    if not name or not isinstance(name, str):
      raise ValueError(f"{self.what}: a name must be a non-empty string, "
                       f"got {name!r}")
    if name in self._entries and not replace:
      raise ValueError(f"{self.field}={name!r} is already registered "
                       f"({self._entries[name]!r}); pass replace=True")
    self._entries[name] = target

  def unregister(self, name: str) -> None:
    self._entries.pop(name, None)

  def names(self) -> tuple[str, ...]:
    return tuple(self._entries)

  def check(self, name) -> None:
    """A :class:`ConfigError` naming the field and every choice for an
    unregistered ``name``."""
    if name not in self._entries:
      raise ConfigError(f"{self.field}={name!r}: expected one of "
                        f"{list(self._entries)}")

  def get(self, name: str):
    """The implementation registered as ``name`` (imported on first use)."""
    self.check(name)
    target = self._entries[name]
    if isinstance(target, str):
      module, sep, attribute = target.partition(":")
      if not sep:
        raise ValueError(f"{self.field}={name!r}: {target!r} is not a "
                         "'module:attribute' path")
      target = getattr(importlib.import_module(module), attribute)
      self._entries[name] = target
    return target


# The agents' text LLM (racer_jax.agents.llm.TextBackend subclasses, built
# by racer_jax.agents.llm_backends.make_backend); "local" is no LLM: the
# agents use the trained JAX models.
LLM_BACKENDS = Registry("agents.backend", "LLM backend")
LLM_BACKENDS.register("local", None)
LLM_BACKENDS.register("gemini", "racer_jax.agents.gemini_backend:GeminiBackend")
LLM_BACKENDS.register("openai", "racer_jax.agents.openai_backend:OpenAIBackend")
LLM_BACKENDS.register("jax", "racer_jax.agents.jax_backend:JaxBackend")

# Every registry whose field the config checks read.
BY_FIELD = {r.field: r for r in (LLM_BACKENDS,)}
