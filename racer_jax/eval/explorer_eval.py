"""GraphDancer's explorer on its own (``--explorer_only`` with
``--llm_setting=graph=explorer``): the LLM explores the answer run's graph
through the graph functions and answers each question itself, with no other
agent; scored as GraphDancer scores it (its Tables 5, 10 and 12): the
explorer's accuracy (the choice its answer names), exact match and ROUGE-L
against the gold choice, valid-format rate per question, valid-call rate,
evidence hit (a concept of the gold choice in the information returned),
calls per question and the share unfinished at the interaction limit."""

from __future__ import annotations

import json
from pathlib import Path

from racer_jax.agents.stack import AgentStack
from racer_jax.errors import ConfigError
from racer_jax.eval import llm_figures, qa_metrics
from racer_jax.runs.eval_output import EvalOutput
from racer_jax.graphdancer import explorer as explorer_lib


def evaluate(config, data_dir, workdir, *, agents, split=None,
             eval_file=None, api_key=None, max_questions: int = 0,
             progress: bool = True, log=print) -> dict:
  if agents.graph != "explorer" or agents.backend == "local":
    raise ConfigError("--explorer_only runs GraphDancer's explorer: add "
                      "--backend=gemini|openai and "
                      "--llm_setting=graph=explorer")
  split = split or config.eval.split
  stack = AgentStack(config, data_dir, workdir, agents=agents,
                     api_key=api_key, split=split, eval_file=eval_file,
                     progress=progress, log=log)
  key = stack.split_key
  data = stack.ws.splits[key]
  n = len(data.examples) if max_questions <= 0 else min(
      max_questions, len(data.examples))
  examples = data.examples[:n]
  explorer = stack.graph.explorer
  log(f"explorer alone ({stack.backend!r}, at most "
      f"{explorer.max_interactions} steps) on {n} questions of {key}")
  transcripts = explorer.run(
      [(ex.stem, list(ex.choices),
        ex.choices[ex.answer_index] if ex.answer_index is not None else None)
       for ex in examples])
  records = []
  for i, (ex, t) in enumerate(zip(examples, transcripts)):
    sg, names = data.subgraphs[i], stack.ws.kg.concepts
    records.append({
        "id": ex.id, "gold": ex.answer_index, "choices": list(ex.choices),
        "choice_concepts": [
            [names[int(c)] for c in sg.nodes[sg.choice_mask[:, j]]]
            for j in range(min(sg.choice_mask.shape[1], len(ex.choices)))],
        "explorer": [explorer_lib.summary(t)], "transcript": t.text,
        "errors": t.errors})
  figures = {"split": key, "questions": n,
             **qa_metrics.explorer_metrics(records),
             "llm": explorer.report.to_dict(),
             **(stack.llm_identity or {})}
  u = figures["llm"]
  figures["tokens_per_question"] = u["tokens"] / max(n, 1)
  name = key + llm_figures.folder_suffix(stack.llm_identity, agents)
  workdir = Path(workdir)
  out = EvalOutput(workdir, f"{name}.explorer_only.first{n}")
  with out.questions() as f:
    for r in records:
      f.write(json.dumps(r) + "\n")
  figures = out.finish(figures, title=f"GraphDancer's explorer alone on "
                       f"{key}, first {n} questions")
  log(f"explorer: accuracy {figures['explorer_accuracy']}, valid format "
      f"{figures['valid_format_rate']:.3f}, valid calls "
      f"{figures['valid_call_rate']:.3f}, {figures['calls_per_question']:.2f}"
      f" calls per question -> {out.dir}")
  return figures
