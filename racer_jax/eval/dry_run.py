"""See before you pay: every prompt an LLM evaluation would send, counted.

  python launch/evaluate.py --workdir=W --backend=gemini --dry_run \
      [--max_questions=N] [--seeds=S]
  python launch/evaluate.py --workdir=W --backend=openai --dry_run \
      --base_url=http://127.0.0.1:8000/v1 --model=Qwen/Qwen2.5-7B-Instruct

The evaluation's own passes run (:mod:`racer_jax.eval.agents_eval`: per seed
the one-round ``no_critic`` pass and the ``full`` pass), with a
:class:`~racer_jax.llm.llm_backends.DryRunBackend` in place of the LLM: every
request is recorded instead of sent, and the agents fall back to the local
models. Round 1 is what can be known in advance, so it is built exactly: the
AnswerAgent's prompts, and the Critic's, for which the local answer stands
in for the LLM's (the proposal line and rationale are the only part that
differs). The stand-in critic accepts, so no later round runs and the shared
memory is not changed by verdicts a real run might not give; later rounds
(re-exploration after UNSURE) depend on the LLM's verdicts and are bounded:
at most ``max_turns - 1`` more answer + critic calls per question.

Writes ``<W>/eval/<split>/prompts.jsonl`` (one line per call: pass, seed,
agent, system, user, tokens, whether the prompt is already in the run's
response cache or repeats an earlier one) and returns the counts: calls,
new calls (what a real run sends), their input tokens (Gemini's
``count_tokens``, or the server's own tokenizer — llama.cpp's servers and
vLLM have a tokenize endpoint — where reachable, else the documented
4-characters-per-token estimate), and the upper bound on output tokens (new
calls × the reply's room plus the thinking budget). Where the API can say
without a paid call, the model is checked to exist first (``model_check``).
No generate call is made.
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Callable

import jax
import tqdm

from racer_jax.agents.answer_agent import LLMAnswerer
from racer_jax.agents.critic import LLMCritic, LocalCritic
from racer_jax.agents.stack import AgentStack
from racer_jax.llm import llm_usage


def dry_run(stack: AgentStack, data, out_dir: Path, *, seeds: int,
            max_turns: int, progress: bool = True,
            log: Callable[[str], None] = print) -> dict:
  """Runs round 1 of each LLM pass of an evaluation (see the module
  docstring) and writes ``out_dir / "prompts.jsonl"``."""
  backend = stack.backend
  config, agents = stack.config, stack.agents
  shots = stack.few_shot()
  accept_all = LocalCritic(0.0, 0.0)
  scratch = llm_usage.UsageReport()  # the stand-in replies are not usage
  batches = list(data.dataset.ordered_batches(config.eval.batch_size))
  passes = [("no_critic", False), ("full", max_turns > 1)]
  marks = []  # (pass, seed) of each recorded request, in order
  for s in range(seeds):
    seed = config.seed + 1000 * s   # as agents_eval.run
    for name, with_critic in passes:
      collab = stack.collaboration(data, accept_all, 1, local_only=True)
      show = bool(agents.show_paths)
      collab.answerer = LLMAnswerer(backend, stack.local, scratch, shots,
                                    show_facts=show)
      collab.memory_templates = stack.memory_templates(collab.graph)
      if with_critic:
        collab.critic = LLMCritic(backend, accept_all, scratch, shots,
                                  show_facts=show)
      collab.graph.reset_memory()
      for batch in tqdm.tqdm(
          batches, desc=f"dry run: {name} seed {s}", disable=not progress):
        before = len(backend.recorded)
        collab.run_batch(batch, data.examples, jax.random.PRNGKey(seed))
        marks += [(name, s)] * (len(backend.recorded) - before)
  questions = int(data.dataset.num_questions)
  per_agent = collections.defaultdict(collections.Counter)
  path = Path(out_dir) / "prompts.jsonl"
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_suffix(".tmp")
  with open(tmp, "w", encoding="utf-8") as f:
    for (request, tokens, cached), (name, s) in zip(backend.recorded, marks):
      mine = per_agent[request.agent or "other"]
      mine["calls"] += 1
      mine["all_input_tokens"] += tokens   # every prompt, cached or not
      if cached:
        mine["cache_hits"] += 1
      else:
        mine["new_calls"] += 1
        mine["input_tokens"] += tokens
      f.write(json.dumps({"pass": name, "seed": s, "round": 1,
                          "agent": request.agent, "system": request.system,
                          "user": request.user, "input_tokens": tokens,
                          "cached_or_repeated": cached}) + "\n")
  os.replace(tmp, path)
  max_out = int(backend.settings.output_cap() or 0)
  new_calls = sum(c["new_calls"] for c in per_agent.values())
  answer = per_agent["answer"]
  later = (max_turns - 1) * questions * seeds * (2 if max_turns > 1 else 0)
  figures = {
      "dry_run": True, **{k: v for k, v in backend.identity().items()
                          if k != "settings"},
      "llm_settings": backend.identity()["settings"],
      "model_check": backend.model_check,
      "questions": questions, "seeds": seeds,
      "max_turns": max_turns, "few_shot": shots.k if shots else 0,
      "few_shot_rule": shots.rule if shots else None,
      "llm_calls": sum(c["calls"] for c in per_agent.values()),
      "llm_new_calls": new_calls,
      "llm_cache_hits": sum(c["cache_hits"] for c in per_agent.values()),
      "input_tokens": sum(c["input_tokens"] for c in per_agent.values()),
      "input_tokens_all_prompts": sum(c["all_input_tokens"]
                                      for c in per_agent.values()),
      "output_tokens_upper_bound": new_calls * max_out if max_out else None,
      "output_cap": max_out or None,
      "later_rounds_calls_upper_bound": later,
      "later_rounds_input_tokens_upper_bound": int(later * (
          sum(c["input_tokens"] for c in per_agent.values()) /
          max(new_calls, 1))),
      "input_tokens_per_question": (
          sum(c["input_tokens"] for c in per_agent.values()) /
          max(questions * seeds, 1)),
      "answer_input_tokens_per_call": (answer["input_tokens"] /
                                       max(answer["new_calls"], 1)),
      "token_count": backend.token_count,
      "per_agent": {a: dict(c) for a, c in sorted(per_agent.items())},
      "prompts_file": str(path), "generate_calls_made": 0}
  log(f"dry run: {figures['llm_calls']} calls ({new_calls} new, "
      f"{figures['llm_cache_hits']} cached or repeated), "
      f"{figures['input_tokens']} input tokens to send "
      f"({figures['input_tokens_all_prompts']} in all the prompts; "
      f"{backend.token_count}), "
      f"output ≤ {figures['output_tokens_upper_bound']} tokens; re-exploration "
      f"rounds add at most {later} calls; prompts in {path}")
  return figures
