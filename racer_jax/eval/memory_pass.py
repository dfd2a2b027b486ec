"""RACER's cross-task memory, accumulated where labels are allowed.

``agents.memory_from_train=True``: at the end of the answer stage the full
agents' loop (critic, re-exploration) runs over the training split without
its validation slice, and the paths behind each final answer add success or
failure counts from the gold answer (UNSURE rounds add rejections, as
always). The memory it leaves — the walker run's counts plus these — is
saved as an orbax checkpoint in the answer run (``agents_memory/
checkpoints``, with a record of what filled it), and every later
evaluation and ``launch/answer.py`` start from it
(:meth:`~racer_jax.agents.stack.AgentStack.prepare_graph`;
``memory_source = train_split_loop``). The pass writes its per-question
JSONL beside it and resumes after a crash (:mod:`racer_jax.eval.passes`);
the checkpoint is written only once the pass is complete.
"""

from __future__ import annotations

from typing import Callable

import jax

from racer_jax.agents import stack as stack_lib
from racer_jax.errors import ConfigError
from racer_jax.eval import passes
from racer_jax.runs.checkpoints import Checkpointer


def build_train_memory(stack: stack_lib.AgentStack, critic, *, limit: int = 0,
                       progress: bool = True,
                       log: Callable[[str], None] = print) -> dict:
  """Runs the pass (see the module docstring) and saves the memory; the
  stack's GraphAgent starts every later pass from it. ``limit`` > 0: only
  the first ``limit`` training questions. Returns the saved record."""
  graph = stack.graph
  if not getattr(graph, "use_memory", False):
    raise ConfigError("agents.memory_from_train=True needs a GraphAgent with "
                      "a shared memory: a walker run trained with "
                      "memory.enabled=True (agents.graph=walker)")
  data = stack.training_questions(limit)
  n = data.dataset.num_questions
  log(f"memory pass: the agents' loop over {n} training questions, "
      "success/failure counts from their gold answers")
  folder = stack.workdir / stack_lib.MEMORY_DIR
  folder.mkdir(parents=True, exist_ok=True)
  collab = stack.collaboration(data, critic, stack.agents.max_turns,
                               local_only=True, learn_from_labels=True)
  result = passes.run_pass(
      collab, data, batch_size=stack.config.eval.batch_size,
      seed=stack.config.seed, path=folder / "train_pass.jsonl", resume=True,
      progress=progress, desc="memory pass (training split)")
  memory = jax.device_get(graph.memory)
  labeled = [r for r in result.records if r.get("gold") is not None]
  record = {
      "source": stack_lib.TRAIN_SPLIT_LOOP, "questions": n,
      "labeled": len(labeled),
      "label_updates": int(sum(r["memory_label_updates"]
                               for r in result.records)),
      "accuracy": (sum(bool(r["correct"]) for r in labeled) /
                   max(len(labeled), 1)),
      "accepted_fraction": (sum(bool(r["accepted"]) for r in result.records)
                            / max(n, 1)),
      "counts": {k: float(getattr(memory, k).sum())
                 for k in ("success", "failure", "rejection")},
      "retrieval_workdir": str(stack.refiner_dir),
      "critic": {"min_confidence": getattr(critic, "min_confidence", None),
                 "min_support": getattr(critic, "min_support", None)}}
  ckpt = Checkpointer(stack_lib.memory_checkpoints(stack.workdir))
  try:
    ckpt.save(n, memory, record)
  finally:
    ckpt.close()
  graph.start_from(graph.memory, stack_lib.TRAIN_SPLIT_LOOP)
  stack.train_memory = record
  log(f"memory pass: {record['label_updates']} edge counts from "
      f"{len(labeled)} training labels -> "
      f"{stack_lib.memory_checkpoints(stack.workdir)}")
  return record
