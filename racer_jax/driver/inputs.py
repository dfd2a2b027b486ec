"""Everything a run needs on the host: the prepared graph, the embedding
tables and, per split, the examples and a :class:`BucketedDataset`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from racer_jax.data import cache, datasets, prepare, qa
from racer_jax.data.bucketed import BucketedDataset
from racer_jax.kg.store import KnowledgeGraph
from racer_jax.kg.subgraph import Subgraph
from racer_jax.text import encoder as encoder_lib
from racer_jax.text import tables


@dataclasses.dataclass
class SplitData:
  examples: list[qa.QAExample]
  subgraphs: list[Subgraph]
  dataset: BucketedDataset


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
  return encoder_lib.get_encoder(config.text.encoder, **kwargs)


def load_workspace(config, data_dir, prep_dir, splits: Sequence[str], *,
                   progress: bool = True,
                   log: Callable[[str], None] = print) -> Workspace:
  """Prepares (or reuses) ``splits`` in ``prep_dir`` and loads them."""
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
    examples, _ = qa.load_jsonl(datasets.split_path(config, split, data_dir),
                                on_bad_line=config.data.on_bad_line)
    subgraphs = cache.load_subgraphs(prep_dir / f"{split}.subgraphs.npz")
    if len(examples) != len(subgraphs):
      raise RuntimeError(f"{prep_dir}: {len(subgraphs)} cached subgraphs "
                         f"for {len(examples)} {split} questions; delete "
                         f"{split}.meta.json to rebuild")
    query = tables.cached_encode(
        prep_dir / f"{split}.query.{encoder.name}.npz",
        [e.stem for e in examples], encoder, log)
    dataset = BucketedDataset(
        subgraphs, [e.answer_index for e in examples], query,
        buckets=[tuple(b) for b in config.batch.buckets],
        num_choices=config.batch.num_choices,
        max_degree=config.subgraph.max_degree)
    out[split] = SplitData(examples, subgraphs, dataset)
  return Workspace(kg=kg, concept_emb=concept_emb, relation_emb=relation_emb,
                   splits=out, prep_dir=prep_dir, report=report)
