"""A resumed evaluation continues the same work or is refused.

Each setting a folder's passes depend on beyond the question file (the
ensemble's members and steps, the LLM behind the agents) is written beside
the records when a pass starts; ``--resume`` with another is refused,
naming what changed, since the records would mix two setups.
"""

from __future__ import annotations

import json
from pathlib import Path

from racer_jax.errors import ConfigError


def require_same(path: Path, record: dict, resume: bool, what: str) -> None:
  """Writes ``record`` to ``path``; with ``resume``, first refuses a
  ``record`` that differs from the one there (``what`` names it)."""
  if resume and path.is_file():
    before = json.loads(path.read_text())
    if before != record:
      changed = sorted(k for k in set(before) | set(record)
                       if before.get(k) != record.get(k))
      raise ConfigError(
          f"{path.parent}: these passes were run with another {what} "
          f"({', '.join(changed)}: {[before.get(k) for k in changed]} then, "
          f"{[record.get(k) for k in changed]} now); rerun without --resume "
          "to start over")
  path.write_text(json.dumps(record, indent=1))
