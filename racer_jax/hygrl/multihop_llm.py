"""A multi-hop run's LLM figures, when an LLM backend is given: the reader
(the LLM answers from a ranking's top passages: EM / F1, tokens per
question; the policy's, and the baselines' to compare the retrievers by
the answers they lead to) and, with ``agents.graph=explorer``,
GraphDancer's explorer on the passage graph (its answer's EM / F1 and the
protocol figures: valid format per question, valid calls, evidence hit — a
gold passage read or listed —, calls per question, unfinished at the
limit)."""

from __future__ import annotations

import numpy as np

from racer_jax.eval import qa_metrics
from racer_jax.graphdancer import explorer as explorer_lib
from racer_jax.graphdancer.tools import PassageGraphTools
from racer_jax.llm import llm, llm_usage

READER_SYSTEM = ("Answer the question from the passages. Reply with JSON: "
                 "answer, a short phrase (a name, a date, yes or no).")
READER_SCHEMA = {"type": "object",
                 "properties": {"answer": {"type": "string"}},
                 "required": ["answer"]}


def reader_prompt(question: str, titles, texts) -> str:
  shown = "\n".join(f"[{i + 1}] {t}: {x}"
                    for i, (t, x) in enumerate(zip(titles, texts)))
  return f"Passages:\n{shown}\n\nQuestion: {question}"


def _scores(answers, golds) -> dict:
  return {"exact_match": qa_metrics.mean_of(
              qa_metrics.exact_match(a, g) for a, g in zip(answers, golds)),
          "f1": qa_metrics.mean_of(
              qa_metrics.token_f1(a, g) for a, g in zip(answers, golds))}


def reader_figures(backend, ws, rows, ranked, k: int = 5,
                   name: str = "reader") -> tuple:
  """``(figures, per-question records)`` of the LLM reading the first
  ``k`` passages of each question's ranking; figures and record fields
  are prefixed ``name`` (``reader`` for the policy's ranking,
  ``bm25_reader`` for BM25's...)."""
  usage = llm_usage.UsageReport()
  questions = [ws.data.questions[i] for i in rows]
  requests = [llm.Request(READER_SYSTEM, reader_prompt(
      q.question, [ws.data.titles[p] for p in r[:k]],
      [ws.data.texts[p] for p in r[:k]]), READER_SCHEMA, agent="reader")
      for q, r in zip(questions, ranked)]
  replies = backend.generate_many(requests)
  records = []
  for q, reply in zip(questions, replies):
    usage.record(reply, "reader")
    answer = (reply.parsed or {}).get("answer", "") if reply.ok else ""
    records.append({"id": q.id, f"{name}_answer": answer,
                    f"{name}_error": reply.error,
                    f"{name}_exact_match": qa_metrics.exact_match(
                        str(answer), q.answer),
                    f"{name}_f1": qa_metrics.token_f1(str(answer), q.answer),
                    **reply.usage()})
  n = max(len(rows), 1)
  u = usage.to_dict()
  figures = {f"{name}_{m}": qa_metrics.mean_of(r[f"{name}_{m}"]
                                               for r in records)
             for m in ("exact_match", "f1")}
  figures.update({
      f"{name}_failed_calls": sum(r.error is not None for r in replies),
      f"{name}_llm_errors": u["llm_errors"],
      f"{name}_tokens_per_question": u["tokens"] / n})
  return figures, records


def explorer_figures(backend, ws, rows, max_interactions: int) -> tuple:
  """``(figures, per-question records)`` of GraphDancer's explorer on the
  passage graph (no choices: its answer is scored against the gold
  string)."""
  usage = llm_usage.UsageReport()
  p = ws.graph.num_passages
  # a node's name vector: its title's (passage i and entity P + i alike)
  name_vecs = np.concatenate([ws.node_vecs[p:], ws.node_vecs[p:]])
  tools = PassageGraphTools(ws.graph.kg, ws.data.texts, ws.encoder,
                            name_vecs)
  explorer = explorer_lib.Explorer(backend, tools, max_interactions, usage,
                                   system=explorer_lib.PASSAGE_SYSTEM)
  questions = [ws.data.questions[i] for i in rows]
  transcripts = explorer.run([(q.question, [], q.answer) for q in questions])
  figures = explorer_lib.metrics(transcripts)
  hits = []
  for q, t in zip(questions, transcripts):
    gold_titles = {ws.data.titles[x] for g in q.gold for x in g}
    seen = "\n".join(t.observations)
    hits.append(any(title in seen for title in gold_titles))
  answers = [t.answer or "" for t in transcripts]
  scores = _scores(answers, [q.answer for q in questions])
  n = max(len(rows), 1)
  u = usage.to_dict()
  out = {"explorer_questions": figures["questions"],
         **{k: figures[k] for k in ("valid_format_rate", "valid_step_rate",
                                    "valid_call_rate", "calls_per_question",
                                    "unfinished_at_limit")},
         "evidence_hit_rate": float(np.mean(hits)) if hits else None,
         "explorer_accuracy": scores["exact_match"],
         "explorer_exact_match": scores["exact_match"],
         "explorer_f1": scores["f1"],
         "explorer_tokens_per_question": u["tokens"] / n,
         # a failed call (no reply to answer) ends its question
         "explorer_failed_calls": sum(t.outcome == "invalid_protocol"
                                      for t in transcripts),
         "explorer_llm_errors": u["llm_errors"]}
  records = [{"id": q.id, "explorer_answer": t.answer,
              "outcome": t.outcome, "steps": t.steps,
              "valid_steps": t.valid_steps, "calls": t.calls,
              "valid_calls": t.valid_calls, "evidence_hit": h,
              "errors": t.errors, "transcript": t.text}
             for q, t, h in zip(questions, transcripts, hits)]
  return out, records
