"""Resumable evaluation passes: per-question JSONL that survives a crash.

A *pass* runs every question of a split through one collaboration (one
system variant, one seed) in dataset batch order. After each batch its
results are appended to ``<name>.jsonl`` (flushed and fsynced) and then the
pass state — batches done and the shared memory's counts — is replaced
atomically in ``<name>.jsonl.state.npz``. ``resume`` trusts the state: it
keeps the records of the batches the state counts as done, drops anything
after them (a torn last line, or a batch whose state never got written),
restores the memory and goes on, so a resumed pass computes exactly what an
uninterrupted one does (every batch samples from ``PRNGKey(seed)``, each
question from its own dataset index: a question's walks depend neither on
its batch nor on the questions beside it).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import jax
import numpy as np
import tqdm

from racer_jax.memory import edge_memory

_MEMORY_FIELDS = ("success", "failure", "rejection")


def read_records(path: Path) -> tuple[list[dict], int]:
  """The complete JSON lines of ``path`` and how many trailing lines were
  torn (no final newline, or not valid JSON; everything from the first bad
  line on is dropped)."""
  data = path.read_bytes()
  lines = data.split(b"\n")
  tail = lines.pop()  # text after the last newline: a torn write
  records, torn = [], int(bool(tail.strip()))
  for i, line in enumerate(lines):
    try:
      records.append(json.loads(line))
    except (json.JSONDecodeError, UnicodeDecodeError):
      torn += len(lines) - i
      break
  return records, torn


def _write_atomic(path: Path, text: str):
  tmp = path.with_name(path.name + ".tmp")
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


@dataclasses.dataclass
class PassResult:
  records: list[dict]       # dataset order
  resumed_batches: int      # batches taken from an earlier, stopped run
  torn_lines: int           # partial lines found and redone
  complete: bool


def _memory_of(graph):
  memory = getattr(graph, "memory", None)
  if memory is None or not getattr(graph, "use_memory", False):
    return None
  return memory


def run_pass(collab, split_data, *, batch_size: int, seed: int, path: Path,
             resume: bool, annotate=None, progress: bool = True,
             desc: str = "", stop_after_batches: int | None = None
             ) -> PassResult:
  """Runs (or resumes) one pass; see the module docstring.

  Args:
    collab: a :class:`racer_jax.agents.agent_loop.Collaboration`; its GraphAgent's
      memory is reset first (then restored from the state when resuming).
    annotate: ``fn(QuestionResult)`` called before a result is written
      (e.g. to attach the choices' concepts).
    stop_after_batches: stop after this many new batches (tests of resume).
  """
  path = Path(path)
  state_path = path.with_name(path.name + ".state.npz")
  dataset = split_data.dataset
  batches = list(dataset.ordered_batches(batch_size))
  graph = collab.graph
  graph.reset_memory()
  done, kept, torn = 0, [], 0
  if resume and path.exists() and state_path.exists():
    with np.load(state_path) as st:
      done = int(st["batches_done"])
      if done > len(batches):
        raise RuntimeError(f"{state_path}: {done} batches done but the split "
                           f"has {len(batches)}; is this the same split?")
      if "success" in st.files and _memory_of(graph) is not None:
        graph.memory = edge_memory.EdgeMemory(
            **{k: jax.numpy.asarray(st[k]) for k in _MEMORY_FIELDS})
    records, torn = read_records(path)
    wanted = {i for b in batches[:done]
              for i in np.asarray(b.example_index)[np.asarray(
                  b.example_mask)].tolist()}
    kept = [r for r in records if r["index"] in wanted]
    if len({r["index"] for r in kept}) != len(wanted):
      # the JSONL lost lines the state counts as done: redo the pass
      done, kept = 0, []
      graph.reset_memory()
  _write_atomic(path, "".join(json.dumps(r) + "\n" for r in kept))
  resumed = done
  new = 0
  with open(path, "a", encoding="utf-8") as out:
    for i, batch in enumerate(tqdm.tqdm(batches, desc=desc,
                                        disable=not progress,
                                        initial=done)):
      if i < done:
        continue
      if stop_after_batches is not None and new >= stop_after_batches:
        return PassResult(sorted(kept, key=lambda r: r["index"]), resumed,
                          torn, False)
      results = collab.run_batch(batch, split_data.examples,
                                 jax.random.PRNGKey(seed))
      rows = []
      for r in results:
        if annotate is not None:
          annotate(r)
        rows.append(r.to_dict())
      out.write("".join(json.dumps(r) + "\n" for r in rows))
      out.flush()
      os.fsync(out.fileno())
      kept += rows
      state = {"batches_done": np.int64(i + 1)}
      memory = _memory_of(graph)
      if memory is not None:
        state.update({k: np.asarray(getattr(memory, k))
                      for k in _MEMORY_FIELDS})
      tmp = state_path.with_name(state_path.name + ".tmp.npz")
      np.savez(tmp, **state)
      os.replace(tmp, state_path)
      new += 1
  return PassResult(sorted(kept, key=lambda r: r["index"]), resumed, torn,
                    True)
