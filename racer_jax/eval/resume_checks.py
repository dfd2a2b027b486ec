"""A resumed evaluation continues the same work or is refused.

What a folder's passes depend on — the questions (their ids and a
fingerprint of their text, choices and labels), the answer and retrieval
runs, the agents' settings, the ensemble's members, the LLM — is written
beside the records when a pass starts; ``--resume`` with anything else is
refused, naming what changed, since the records would mix two setups.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from racer_jax.errors import ConfigError


# Agents' settings that do not change an answer: a resume may change them.
_HARMLESS = ("timeout_s", "attempts", "max_retry_wait_s", "max_concurrency",
             "min_llm_answered")


def work_of(stack, data, agents) -> dict:
  """What the passes over ``data`` (a loaded split) compute from: the
  questions in order, the runs, the agents' settings and the seed."""
  digest = hashlib.sha256()
  ids = []
  for i in data.dataset.ids:
    e = data.examples[int(i)]
    ids.append(e.id)
    digest.update(json.dumps([e.id, e.stem, list(e.choices),
                              e.answer_index]).encode())
  steps = stack.local.step
  return {"questions": len(ids), "first_id": ids[0] if ids else None,
          "last_id": ids[-1] if ids else None,
          "questions_sha256": digest.hexdigest(),
          "answer_run": str(stack.workdir.resolve()),
          "answer_step": steps if isinstance(steps, list) else [steps],
          "retrieval_run": str(stack.refiner_dir),
          "paths_per_choice": int(stack.keep),
          "seed": int(stack.config.seed),
          "batch_size": int(stack.config.eval.batch_size),
          **{f"agents.{k}": v for k, v in sorted(agents.to_dict().items())
             if k not in _HARMLESS}}


def require_same(path: Path, record: dict, resume: bool, what: str) -> None:
  """Writes ``record`` to ``path``; with ``resume``, first refuses a
  ``record`` that differs from the one there (``what`` names it)."""
  record = json.loads(json.dumps(record))  # as it reads back (tuples: lists)
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
