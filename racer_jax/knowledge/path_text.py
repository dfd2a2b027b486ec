"""Knowledge-graph paths as data and as the sentences the answerer reads.

A path is a list of :class:`Triple` s as walked (``head -relation-> tail``,
the relation possibly an inverse ``_name``). Every triple is phrased through
its forward reading, so an inverse edge ``b -_atlocation-> a`` reads "a is
found at b", exactly what the KG asserts. :class:`RetrievedPath` is one path
the GraphAgent kept for a choice, with its refiner score. The TemplateAgent
(:mod:`racer_jax.agents.templates`) and the answer models' knowledge inputs
both render paths through these functions.
"""

from __future__ import annotations

import dataclasses

from racer_jax.kg import relations as rel_lib

# One forward template per merged relation ({h}: head, {t}: tail).
TEMPLATES: dict[str, str] = {
    "antonym": "{h} is the opposite of {t}",
    "atlocation": "{h} is found at {t}",
    "capableof": "{h} can {t}",
    "causes": "{h} causes {t}",
    "createdby": "{h} is created by {t}",
    "isa": "{h} is a kind of {t}",
    "desires": "{h} wants {t}",
    "hassubevent": "{h} involves {t}",
    "partof": "{h} is part of {t}",
    "hascontext": "{h} is used in the context of {t}",
    "hasproperty": "{h} is {t}",
    "madeof": "{h} is made of {t}",
    "notcapableof": "{h} cannot {t}",
    "notdesires": "{h} does not want {t}",
    "receivesaction": "{h} can be {t}",
    "relatedto": "{h} is related to {t}",
    "usedfor": "{h} is used for {t}",
}
assert set(TEMPLATES) == set(rel_lib.MERGED_RELATIONS)


@dataclasses.dataclass(frozen=True)
class Triple:
  """One walked hop: concept names and the relation name (``_`` prefix for
  an inverse edge), plus the KG's global edge id (-1 if unknown)."""
  head: str
  relation: str
  tail: str
  edge_id: int = -1

  @property
  def forward(self) -> tuple[str, str, str]:
    """The triple as the KG asserts it: ``(head, relation, tail)`` with the
    inverse undone."""
    if self.relation.startswith("_"):
      return self.tail, self.relation[1:], self.head
    return self.head, self.relation, self.tail

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)


def concept_text(name: str) -> str:
  """``"ice_cream"`` -> ``"ice cream"``."""
  return name.replace("_", " ")


def sentence(triple: Triple) -> str:
  """A natural-language sentence for one triple, inverse relations phrased
  through their forward reading."""
  head, relation, tail = triple.forward
  if relation not in TEMPLATES:
    raise KeyError(f"no template for relation {relation!r}")
  text = TEMPLATES[relation].format(h=concept_text(head), t=concept_text(tail))
  return text[0].upper() + text[1:] + "."


def chain(path: list[Triple]) -> str:
  """The logical chain of a path: ``"bird --capableof--> fly --..."``."""
  if not path:
    return ""
  parts = [path[0].head]
  for t in path:
    parts.append(f"--{t.relation}--> {t.tail}")
  return " ".join(parts)


def path_sentences(path: list[Triple]) -> str:
  """All of a path's sentences, joined."""
  return " ".join(sentence(t) for t in path)


def knowledge_text(paths: list[list[Triple]], max_sentences: int = 0) -> str:
  """The knowledge shown to the answerer for one choice: the distinct
  sentences of its paths in order, at most ``max_sentences`` (0: all)."""
  seen, out = set(), []
  for path in paths:
    for t in path:
      s = sentence(t)
      if s not in seen:
        seen.add(s)
        out.append(s)
  if max_sentences:
    out = out[:max_sentences]
  return " ".join(out)


@dataclasses.dataclass
class RetrievedPath:
  triples: list[Triple]
  score: float          # the refiner's score
  reached: bool         # the walk reached the choice it was aimed at
  verified: bool        # every triple exists in the KG

  @property
  def edge_ids(self) -> list[int]:
    return [t.edge_id for t in self.triples]

  def to_dict(self) -> dict:
    return {"triples": [t.to_dict() for t in self.triples],
            "score": self.score, "reached": self.reached,
            "verified": self.verified}

  @classmethod
  def from_dict(cls, d: dict) -> "RetrievedPath":
    return cls([Triple(**t) for t in d["triples"]], float(d["score"]),
               bool(d["reached"]), bool(d["verified"]))
