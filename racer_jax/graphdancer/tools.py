"""GraphDancer's graph functions over the KG and its strict step protocol.

Functions (GRBench / Graph-CoT names), called as ``Name[arg, arg]``:

* ``RetrieveNode[keyword]`` -> the concept that best matches the keyword:
  an exact (lower-cased, ``_``-joined) name first, else the nearest concept
  by text embedding (cosine), among concepts sharing a word with the
  keyword when there are any;
* ``NodeFeature[node, feature]`` with feature ``name`` | ``degree`` |
  ``relations`` (the relation types on its edges);
* ``NodeDegree[node, relation]`` -> how many ``relation`` edges leave it;
* ``NeighbourCheck[node, relation]`` -> its ``relation`` neighbours (the
  heaviest ``max_neighbours``).

A node name may hold commas (``NodeFeature[P:John Wallop, 2nd Earl of
Portsmouth, text]``): the arguments beyond a function's count are joined
back into its first. A wrong node or relation name, too few arguments or an
unknown function
raises :class:`ToolError` whose message says what was wrong and what is
valid — the explorer returns it to the LLM as the observation.

One model step is ``<think>…</think>`` followed by exactly one of
``<graph>Function[args]</graph>`` or ``<answer>…</answer>``, and nothing
else; :func:`parse_step` enforces it and raises :class:`ProtocolError`.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from racer_jax.agents.templates import Triple
from racer_jax.errors import RacerError

FUNCTIONS = ("RetrieveNode", "NodeFeature", "NodeDegree", "NeighbourCheck")
ARITY = {"RetrieveNode": 1, "NodeFeature": 2, "NodeDegree": 2,
         "NeighbourCheck": 2}
FEATURES = ("name", "degree", "relations")


class ToolError(RacerError):
  """A graph function called with a wrong name or argument."""


class ProtocolError(RacerError):
  """A model step that breaks the ``<think>/<graph>/<answer>`` protocol."""


@dataclasses.dataclass(frozen=True)
class Step:
  think: str
  function: str | None = None    # for a <graph> step
  args: tuple[str, ...] = ()
  answer: str | None = None      # for an <answer> step

  @property
  def is_answer(self) -> bool:
    return self.answer is not None


_TAG = r"</?(?:think|graph|answer|information)>"
_TEXT = rf"(?:(?!{_TAG}).)*"     # text holding no protocol tag
_THINK = re.compile(r"\A\s*<think>(?P<think>.*?)</think>", re.DOTALL)
_ACTION = re.compile(rf"\A\s*(?:<graph>(?P<graph>{_TEXT})</graph>|"
                     rf"<answer>(?P<answer>{_TEXT})</answer>)\s*\Z",
                     re.DOTALL)
_CALL = re.compile(r"\A\s*(?P<name>[A-Za-z]+)\[(?P<args>[^\[\]]*)\]\s*\Z")


def parse_step(text: str | None) -> Step:
  """One model step, strictly (see the module docstring)."""
  if not text or not text.strip():
    raise ProtocolError("empty step")
  think = _THINK.match(text)
  if think is None:
    raise ProtocolError("missing <think>…</think> at the start")
  if re.search(_TAG, think.group("think")):
    raise ProtocolError("a protocol tag inside <think>")
  rest = text[think.end():]
  if "<graph>" not in rest and "<answer>" not in rest:
    raise ProtocolError("no <graph> call and no <answer>")
  m = _ACTION.match(rest)
  if m is None:
    raise ProtocolError("text outside the tags, a tag left open, or more "
                        "than one <graph>/<answer> in one step")
  if m.group("answer") is not None:
    answer = m.group("answer").strip()
    if not answer or "<" in answer:
      raise ProtocolError("empty or tagged <answer>")
    return Step(think.group("think").strip(), answer=answer)
  call = _CALL.match(m.group("graph"))
  if call is None:
    raise ProtocolError(f"<graph> must hold Function[args], got "
                        f"{m.group('graph').strip()[:60]!r}")
  name = call.group("name")
  args = tuple(a.strip() for a in call.group("args").split(","))
  if args == ("",):
    args = ()
  return Step(think.group("think").strip(), function=name, args=args)


class GraphTools:
  """The four functions over a :class:`~racer_jax.kg.store.KnowledgeGraph`.

  ``encoder`` + ``concept_emb`` (float32 [V, d], L2-normalized) enable the
  embedding match of RetrieveNode; without them it is lexical only.
  Every neighbour listed is remembered as evidence (:attr:`seen`).
  """

  def __init__(self, kg, encoder=None, concept_emb=None,
               max_neighbours: int = 15):
    self.kg = kg
    self.encoder = encoder
    self.concept_emb = concept_emb
    self.max_neighbours = max_neighbours
    self._words = None

  # -- name resolution -----------------------------------------------------
  def _node(self, name: str) -> int:
    key = name.strip().lower().replace(" ", "_")
    c = self.kg.get_concept_id(key)
    if c < 0:
      raise ToolError(f"node {name!r} does not exist; use RetrieveNode "
                      "[keyword] to find a node name")
    return c

  def _relation(self, name: str) -> int:
    key = name.strip().lower().replace(" ", "")
    if key not in self.kg.relations:
      raise ToolError(f"relation {name!r} does not exist; relations: "
                      f"{', '.join(self.kg.relations)}")
    return self.kg.relations.index(key)

  def _word_index(self) -> dict[str, list[int]]:
    if self._words is None:
      words: dict[str, list[int]] = {}
      for i, c in enumerate(self.kg.concepts):
        for w in c.split("_"):
          words.setdefault(w, []).append(i)
      self._words = words
    return self._words

  # -- the functions -------------------------------------------------------
  def retrieve_node(self, keyword: str) -> str:
    key = keyword.strip().lower()
    if not key:
      raise ToolError("RetrieveNode needs a keyword")
    exact = self.kg.get_concept_id(key.replace(" ", "_"))
    if exact >= 0:
      return self.kg.concepts[exact]
    index = self._word_index()
    pool = sorted({i for w in re.split(r"[\s_]+", key) for i in
                   index.get(w, [])})
    if self.encoder is None or self.concept_emb is None:
      if not pool:
        raise ToolError(f"no node matches {keyword!r}")
      return min((self.kg.concepts[i] for i in pool), key=len)
    q = self.encoder.encode([keyword])[0]
    cand = np.asarray(pool) if pool else np.arange(len(self.kg.concepts))
    scores = np.asarray(self.concept_emb)[cand] @ q
    return self.kg.concepts[int(cand[int(np.argmax(scores))])]

  def node_feature(self, node: str, feature: str) -> str:
    c = self._node(node)
    feature = feature.strip().lower()
    if feature == "name":
      return self.kg.concepts[c].replace("_", " ")
    if feature == "degree":
      return str(self.kg.degree(c))
    if feature == "relations":
      rels = np.unique(self.kg.out_edges(c)["rel"])
      return ", ".join(self.kg.relations[int(r)] for r in rels)
    raise ToolError(f"feature {feature!r} does not exist; features: "
                    f"{', '.join(FEATURES)}")

  def node_degree(self, node: str, relation: str) -> str:
    c, r = self._node(node), self._relation(relation)
    return str(int(np.sum(self.kg.out_edges(c)["rel"] == r)))

  def neighbours(self, node: str, relation: str) -> list[Triple]:
    c, r = self._node(node), self._relation(relation)
    row = self.kg.out_edges(c)
    hit = np.flatnonzero(row["rel"] == r)
    hit = hit[np.argsort(-row["weight"][hit], kind="stable")]
    return [Triple(self.kg.concepts[c], self.kg.relations[r],
                   self.kg.concepts[int(row["dst"][i])],
                   int(row["edge_id"][i]))
            for i in hit[:self.max_neighbours]]

  def call(self, function: str, args) -> tuple[str, list[Triple]]:
    """``(observation, evidence triples)``; raises :class:`ToolError`."""
    if function not in FUNCTIONS:
      raise ToolError(f"unknown function {function!r}; functions: "
                      f"{', '.join(FUNCTIONS)}")
    if len(args) > ARITY[function]:   # a name with commas: rejoin it
      keep = ARITY[function] - 1
      args = (", ".join(args[:len(args) - keep]),) + tuple(
          args[len(args) - keep:])
    if len(args) != ARITY[function]:
      raise ToolError(f"{function} takes {ARITY[function]} argument(s), "
                      f"got {len(args)}")
    if function == "RetrieveNode":
      return self.retrieve_node(*args), []
    if function == "NodeFeature":
      return self.node_feature(*args), []
    if function == "NodeDegree":
      return self.node_degree(*args), []
    triples = self.neighbours(*args)
    names = ", ".join(t.tail for t in triples)
    return (f"[{names}]" if triples else "[] (no such neighbours)"), triples


class PassageGraphTools(GraphTools):
  """The same functions over a passage graph
  (:mod:`racer_jax.kg.passage_graph`): nodes are ``P:title`` (passages)
  and ``E:title`` (entities), named exactly or case-insensitively; a bare
  title names the passage. ``NodeFeature[P:title, text]`` returns the
  passage's text; ``RetrieveNode`` finds the exact name, else the node
  whose name vector is closest to the keyword's (names only, without
  ``encoder``: the shortest name sharing a word)."""

  def __init__(self, kg, texts, encoder=None, name_emb=None,
               max_neighbours: int = 15):
    super().__init__(kg, encoder, name_emb, max_neighbours)
    self.texts = texts
    self._lower = {c.lower(): i for i, c in enumerate(kg.concepts)}

  def _node(self, name: str) -> int:
    key = name.strip()
    for candidate in (key, f"P:{key}"):
      c = self.kg.get_concept_id(candidate)
      if c >= 0:
        return c
    for candidate in (key.lower(), f"p:{key.lower()}"):
      if candidate in self._lower:
        return self._lower[candidate]
    raise ToolError(f"node {name!r} does not exist; use RetrieveNode"
                    "[keyword] to find a node name")

  def _word_index(self) -> dict[str, list[int]]:
    if self._words is None:
      words: dict[str, list[int]] = {}
      for i, c in enumerate(self.kg.concepts):
        for w in set(re.findall(r"\w+", c[2:].lower())):
          words.setdefault(w, []).append(i)
      self._words = words
    return self._words

  def retrieve_node(self, keyword: str) -> str:
    key = keyword.strip()
    if not key:
      raise ToolError("RetrieveNode needs a keyword")
    try:
      return self.kg.concepts[self._node(key)]
    except ToolError:
      pass
    index = self._word_index()
    pool = sorted({i for w in re.findall(r"\w+", key.lower())
                   for i in index.get(w, [])})
    if self.encoder is None or self.concept_emb is None:
      if not pool:
        raise ToolError(f"no node matches {keyword!r}")
      return min((self.kg.concepts[i] for i in pool), key=len)
    q = self.encoder.encode([key])[0]
    cand = np.asarray(pool) if pool else np.arange(len(self.kg.concepts))
    scores = np.asarray(self.concept_emb)[cand] @ q
    return self.kg.concepts[int(cand[int(np.argmax(scores))])]

  def node_feature(self, node: str, feature: str) -> str:
    f = feature.strip().lower()
    if f == "text":
      c = self._node(node)
      if c >= len(self.texts):
        raise ToolError(f"{self.kg.concepts[c]} is an entity; its passage "
                        f"P:{self.kg.concepts[c][2:]} has the text")
      return self.texts[c]
    if f == "name":
      return self.kg.concepts[self._node(node)]
    if f in ("degree", "relations"):
      return super().node_feature(node, f)
    raise ToolError(f"feature {feature!r} does not exist; features: name, "
                    "text, degree, relations")
