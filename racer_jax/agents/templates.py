"""TemplateAgent: knowledge-graph paths as readable chains and sentences.

The sentences come from :mod:`racer_jax.knowledge.path_text` (one forward
template per relation, inverse edges read forward). The optional LLM rewrite (through
an :mod:`racer_jax.llm.llm` backend) only polishes these sentences; the
sentences themselves are the evidence shown to the answerer.
"""

from __future__ import annotations

import numpy as np

from racer_jax.knowledge.path_text import (  # noqa: F401  (the agent's vocabulary)
  TEMPLATES,
  Triple,
  chain,
  concept_text,
  knowledge_text,
  path_sentences,
  sentence,
)
from racer_jax.llm import llm
from racer_jax.runs import registry

REWRITE_SYSTEM = (
    "Rewrite the numbered knowledge statements as fluent English, one line "
    "per statement, keeping their meaning and their order. Do not add facts.")


def rewrite(backend, sentences: list[str], report=None) -> list[str]:
  """Optional LLM polish of sentences through a backend (see
  :mod:`racer_jax.llm.llm`; ``report``: a UsageReport counting the call
  as the ``template`` agent's). Falls back to the templates when the reply
  does not have one line per sentence."""
  if not sentences:
    return []
  prompt = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(sentences))
  [reply] = backend.generate_many([llm.Request(REWRITE_SYSTEM, prompt,
                                           agent="template")])
  if report is not None:
    report.record(reply, "template")
    if not reply.ok:
      report.fallback("template")
  lines = [ln.split(".", 1)[-1].strip() if ln[:1].isdigit() else ln.strip()
           for ln in (reply.text or "").splitlines() if ln.strip()]
  return lines if len(lines) == len(sentences) else list(sentences)


# The TemplateAgent with the shared memory (``agents.template=memory``):
# each path as a logical chain and its sentences, ordered by how the memory
# rates its weakest edge, with that rating shown and rejected edges flagged
# (or the path dropped).
RELIABLE, UNRELIABLE = 0.1, -0.1  # edge quality lies in (-1/2, 1/2)


def logical_chain(path: list[Triple]) -> str:
  """``"plate —AtLocation→ cupboard ←PartOf— kitchen"``: each hop in the
  walk's direction, an inverse edge drawn as the forward one reversed."""
  if not path:
    return ""
  parts = [concept_text(path[0].head)]
  for t in path:
    name = t.relation.lstrip("_")
    arrow = f"←{name}—" if t.relation.startswith("_") else f"—{name}→"
    parts.append(f"{arrow} {concept_text(t.tail)}")
  return " ".join(parts)


def reliability(quality: float) -> str:
  """The memory's rating of a path (its weakest edge's quality) in words."""
  if quality > RELIABLE:
    return "high"
  return "low" if quality < UNRELIABLE else "unproven"


def rate_paths(paths, edge_quality, edge_rejections, *,
               rejected: str = "flag") -> list[tuple]:
  """``[(path, quality, rejections)]``: one choice's paths (objects with
  ``.triples``) with their weakest edge's quality and the most times one of
  their edges was rejected, best quality first (ties: the order given);
  with ``rejected="drop"`` a path with a rejected edge is left out.
  ``edge_quality``, ``edge_rejections``: [E] arrays by global edge id."""
  if rejected not in ("flag", "drop"):
    raise ValueError(f"agents.rejected_edges={rejected!r}: expected flag "
                     "or drop")
  rows = []
  for order, path in enumerate(paths):
    ids = [t.edge_id for t in path.triples if 0 <= t.edge_id <
           len(edge_quality)]
    q = min((float(edge_quality[i]) for i in ids), default=0.0)
    times = max((int(edge_rejections[i]) for i in ids), default=0)
    if times and rejected == "drop":
      continue
    rows.append((-q, order, path, q, times))
  return [(p, q, t) for _, _, p, q, t in sorted(rows, key=lambda r: r[:2])]


def rating(quality: float, rejections: int) -> str:
  """``"[reliability: high, memory +0.31; an edge of it was rejected 2
  times]"``."""
  out = f"[reliability: {reliability(quality)}, memory {quality:+.2f}"
  if rejections:
    out += (f"; an edge of it was rejected {rejections} time"
            f"{'s' if rejections > 1 else ''}")
  return out + "]"


def memory_facts(paths, edge_quality, edge_rejections, *,
                 rejected: str = "flag") -> list[str]:
  """One choice's paths as lines ``"<chain>: <sentences> [reliability:
  ...]"`` in :func:`rate_paths` order."""
  return [f"{logical_chain(p.triples)}: {path_sentences(p.triples)} "
          f"{rating(q, t)}" for p, q, t in
          rate_paths(paths, edge_quality, edge_rejections, rejected=rejected)]


def fluent_facts(backend, paths, edge_quality, edge_rejections, *,
                 rejected: str = "flag", report=None) -> list[str]:
  """:func:`memory_facts` with each path's sentences rewritten into fluent
  text by an LLM (:func:`rewrite`, one call per choice, cached by the
  backend), the verified chain kept beside it as the evidence:
  ``"<fluent text> (evidence: <chain>) [reliability: ...]"``."""
  rated = rate_paths(paths, edge_quality, edge_rejections, rejected=rejected)
  fluent = rewrite(backend, [path_sentences(p.triples) for p, _, _ in rated],
                   report)
  return [f"{text} (evidence: {logical_chain(p.triples)}) {rating(q, t)}"
          for text, (p, q, t) in zip(fluent, rated)]


def memory_renderer(graph, num_edges: int, mode: str = "memory",
                    rejected: str = "flag", backend=None, report=None):
  """``(own, paths) -> per choice lines`` over each choice's own triples
  then its paths, under ``graph``'s shared memory as it is at each call:
  :func:`memory_facts` (``mode="memory"``), :func:`fluent_facts` through
  ``backend`` (``"llm"``), or each path's sentences (``"plain"``). A
  graph agent without a memory rates every edge unproven."""
  if mode not in ("memory", "llm", "plain"):
    raise ValueError(f"agents.template={mode!r}: expected memory, llm or "
                     "plain")
  if rejected not in ("flag", "drop"):
    raise ValueError(f"agents.rejected_edges={rejected!r}: expected flag "
                     "or drop")
  if mode == "plain":
    return lambda own, paths: [[path_sentences(p.triples) for p in
                                list(o) + list(ps)]
                               for o, ps in zip(own, paths)]
  if mode == "llm" and backend is None:
    raise ValueError("agents.template=llm rewrites through an LLM backend: "
                     "use it with " + registry.llm_backend_flags())
  zeros = np.zeros(num_edges, np.float32)

  def render(own, paths):
    memory = getattr(graph, "memory", None)
    quality = (graph.edge_quality() if hasattr(graph, "edge_quality")
               else zeros)
    rejections = (np.asarray(memory.rejection) if memory is not None
                  else zeros)
    if mode == "llm":
      return [fluent_facts(backend, list(o) + list(p), quality, rejections,
                           rejected=rejected, report=report)
              for o, p in zip(own, paths)]
    return [memory_facts(list(o) + list(p), quality, rejections,
                         rejected=rejected) for o, p in zip(own, paths)]
  return render
