"""ConceptNet relation merging, as in the KG-QA literature (MHGRN, QA-GNN).

ConceptNet 5 has ~47 relations; KG-QA work merges them into 17 types, some with
the direction reversed (``motivatedbygoal`` becomes ``causes`` read backwards;
``hasa`` becomes ``partof`` read backwards). Every merged relation ``r`` also
exists as its inverse ``r + NUM_RELATIONS`` once the graph store materializes
inverse edges, named ``"_" + name`` (read: "is the ``name`` of").
"""

from __future__ import annotations

MERGED_RELATIONS: tuple[str, ...] = (
    "antonym", "atlocation", "capableof", "causes", "createdby", "isa",
    "desires", "hassubevent", "partof", "hascontext", "hasproperty", "madeof",
    "notcapableof", "notdesires", "receivesaction", "relatedto", "usedfor",
)
NUM_RELATIONS = len(MERGED_RELATIONS)  # 17

# source relation (lowercase, no "/r/") -> (merged relation, reversed?)
_SOURCES: dict[str, tuple[str, ...]] = {
    "antonym": ("antonym", "distinctfrom"),
    "atlocation": ("atlocation", "locatednear"),
    "capableof": ("capableof",),
    "causes": ("causes", "causesdesire", "*motivatedbygoal"),
    "createdby": ("createdby",),
    "isa": ("isa", "instanceof", "definedas"),
    "desires": ("desires",),
    "hassubevent": ("hassubevent", "hasfirstsubevent", "haslastsubevent",
                    "hasprerequisite", "entails", "mannerof"),
    "partof": ("partof", "*hasa"),
    "hascontext": ("hascontext",),
    "hasproperty": ("hasproperty",),
    "madeof": ("madeof",),
    "notcapableof": ("notcapableof",),
    "notdesires": ("notdesires",),
    "receivesaction": ("receivesaction",),
    "relatedto": ("relatedto", "similarto", "synonym"),
    "usedfor": ("usedfor",),
}

RELATION_MAP: dict[str, tuple[int, bool]] = {}
for _merged, _sources in _SOURCES.items():
  for _src in _sources:
    RELATION_MAP[_src.lstrip("*")] = (MERGED_RELATIONS.index(_merged),
                                      _src.startswith("*"))
del _merged, _sources, _src

# Concepts that the "pruned" KG variant removes (edges touching them are
# dropped), following MHGRN's blacklist of uninformative hub concepts.
PRUNE_BLACKLIST: frozenset[str] = frozenset({
    "-pron-", "actually", "likely", "possibly", "want", "make", "my", "someone",
    "sometimes_people", "sometimes", "would", "want_to", "one", "something",
    "everybody", "somebody", "could", "could_be",
})


def normalize_relation_name(name: str) -> str:
  """``"/r/MotivatedByGoal"`` or ``"MotivatedByGoal"`` -> ``"motivatedbygoal"``."""
  name = name.strip()
  if name.startswith("/r/"):
    name = name[3:]
  return name.split("/", 1)[0].replace("_", "").lower()


def merge_relation(name: str) -> tuple[int, bool] | None:
  """Maps a source relation name to ``(merged relation id, reversed)``.

  Returns ``None`` for relations the merge drops (``externalurl``,
  ``symbolof``, negated relations other than the two kept, ...).
  """
  return RELATION_MAP.get(normalize_relation_name(name))


def relation_names() -> tuple[str, ...]:
  """Names of all ``2 * NUM_RELATIONS`` relation ids, inverses included."""
  return MERGED_RELATIONS + tuple("_" + r for r in MERGED_RELATIONS)
