"""Everything a run needs on the host: the prepared graph, the embedding
tables and, per split, the examples and a :class:`BucketedDataset`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from racer_jax.data import datasets, prepare, qa, subgraph_cache, validation
from racer_jax.data.bucketed import BucketedDataset
from racer_jax.kg.store import KnowledgeGraph
from racer_jax.kg.subgraph import Subgraph
from racer_jax.text import encoder as encoder_lib
from racer_jax.text import encoder_registry, tables


@dataclasses.dataclass
class SplitData:
  """A loaded split. A split loaded with its validation slice held out
  keeps all ``examples`` and ``subgraphs`` but leaves the slice out of
  ``dataset``."""
  examples: list[qa.QAExample]
  subgraphs: list[Subgraph]
  dataset: BucketedDataset
  query: np.ndarray | None = None  # float32 [len(examples), d]


@dataclasses.dataclass
class Workspace:
  kg: KnowledgeGraph
  concept_emb: np.ndarray   # float32 [V, d]
  relation_emb: np.ndarray  # float32 [R2, d]
  splits: dict[str, SplitData]
  prep_dir: Path
  report: dict


def make_encoder(config) -> encoder_lib.TextEncoder:
  kwargs = {"model_dir": config.text.model_dir} if config.text.model_dir else {}
  return encoder_registry.get_encoder(config.text.encoder, **kwargs)


def load_workspace(config, data_dir, prep_dir, splits: Sequence[str], *,
                   progress: bool = True,
                   log: Callable[[str], None] = print,
                   hold_out: Sequence[str] = ()) -> Workspace:
  """Prepares (or reuses) ``splits`` in ``prep_dir`` and loads them.

  The datasets of the splits in
  ``hold_out`` leave out the validation slice of ``config``
  (:mod:`racer_jax.data.validation`; ``examples`` and ``subgraphs`` keep
  every question, batches report dataset indices).
  """
  prep_dir = Path(prep_dir)
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.data.splits = tuple(splits)
  report = prepare.prepare(config, data_dir, prep_dir, progress=progress,
                           log=log)
  kg = KnowledgeGraph.load(prep_dir / "kg.npz")
  encoder = make_encoder(config)
  concept_emb, relation_emb = tables.graph_tables(kg, encoder, prep_dir, log)
  data_dir = datasets.resolve_data_dir(data_dir)
  out = {}
  for split in splits:
    examples, loaded = qa.load_jsonl(
        datasets.split_path(config, split, data_dir),
        on_bad_line=config.data.on_bad_line)
    if loaded.duplicate_choices:
      log(f"warning: {loaded.duplicate_choices} {split} question(s) give a "
          f"choice twice; the first: {loaded.warnings[0]}")
    cached = prep_dir / f"{split}.subgraphs.npz"
    num_nodes, _ = subgraph_cache.subgraph_sizes(cached)
    if len(examples) != len(num_nodes):
      raise RuntimeError(f"{prep_dir}: {len(num_nodes)} cached subgraphs "
                         f"for {len(examples)} {split} questions; delete "
                         f"{split}.meta.json to rebuild")
    query = tables.cached_encode(
        prep_dir / f"{split}.query.{encoder.name}.npz",
        [e.stem for e in examples], encoder, log)
    buckets = [tuple(b) for b in config.batch.buckets]
    kept = np.ones(len(examples), bool)
    if split in hold_out:
      kept[validation.split_rows(config, len(examples))[1]] = False
      if not kept.all():
        log(f"{split}: {int((~kept).sum()):,} questions of the validation "
            "slice left out (the critic is calibrated on them)")

    subgraphs = subgraph_cache.load_subgraphs(cached)
    ids = np.flatnonzero(kept)
    out[split] = SplitData(examples, subgraphs, BucketedDataset(
        [subgraphs[i] for i in ids], [examples[i].answer_index for i in ids],
        query[ids], buckets=buckets, num_choices=config.batch.num_choices,
        max_degree=config.subgraph.max_degree, ids=ids), query)
  return Workspace(kg=kg, concept_emb=concept_emb, relation_emb=relation_emb,
                   splits=out, prep_dir=prep_dir, report=report)


def subset(data: SplitData, rows, config) -> SplitData:
  """The questions ``rows`` (split indices, as batches report them) of a
  loaded split or of a subset of one, e.g. its validation slice."""
  rows, full = np.asarray(rows, np.int64), data.dataset
  at = {int(i): k for k, i in enumerate(full.ids)}  # row -> query position
  return SplitData(data.examples, data.subgraphs, BucketedDataset(
      [data.subgraphs[i] for i in rows],
      [data.examples[i].answer_index for i in rows],
      full.query[[at[int(i)] for i in rows]],
      buckets=[tuple(b) for b in config.batch.buckets],
      num_choices=config.batch.num_choices,
      max_degree=config.subgraph.max_degree, ids=rows))
