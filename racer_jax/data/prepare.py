"""The preparation pipeline: KG store -> grounding -> subgraphs -> report.

``prepare`` writes into ``out_dir``:

* ``kg.npz`` (graph store) and ``kg_report.json`` (ingest + build counts);
* per split ``<split>.grounded.jsonl``, ``<split>.subgraphs.npz`` and
  ``<split>.meta.json`` (its report and a fingerprint of inputs + config);
* ``report.json`` with everything.

Outputs whose fingerprint matches the current inputs and config are reused,
so an interrupted run continues where it stopped.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
from pathlib import Path
from typing import Callable

import numpy as np
import tqdm

from racer_jax.data import datasets, qa, subgraph_cache
from racer_jax.data.batch import choose_bucket
from racer_jax.errors import ConfigError, DataError
from racer_jax.kg import grounding, ingest, store, subgraph


def _fingerprint(*parts) -> str:
  h = hashlib.sha256()
  for p in parts:
    if isinstance(p, Path):
      st = p.stat()
      p = f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    h.update(json.dumps(p, sort_keys=True, default=str).encode())
  return h.hexdigest()[:16]


def _read_meta(path: Path) -> dict | None:
  try:
    return json.loads(path.read_text())
  except (OSError, ValueError):
    return None


def write_json(path: Path, obj) -> None:
  """``obj`` as indented JSON at ``path``, atomically (tmp + rename)."""
  path = Path(path)
  tmp = path.with_suffix(path.suffix + ".tmp")
  tmp.write_text(json.dumps(obj, indent=1, sort_keys=True))
  os.replace(tmp, path)


def check_buckets(config) -> None:
  """The largest bucket must hold the extraction caps (+1 padding node)."""
  n, e = max(tuple(b) for b in config.batch.buckets)
  if config.subgraph.max_nodes + 1 > n or config.subgraph.max_edges > e:
    raise ConfigError(
        f"batch.buckets largest {(n, e)} cannot hold subgraph.max_nodes+1="
        f"{config.subgraph.max_nodes + 1} / subgraph.max_edges="
        f"{config.subgraph.max_edges}")


def build_kg(config, data_dir, progress: bool = False
             ) -> tuple[store.KnowledgeGraph, dict]:
  """Ingests the configured KG source and builds the CSR store in memory."""
  fmt, paths = datasets.kg_paths(config, data_dir)
  read = (ingest.read_triple_files if fmt == "triples"
          else ingest.read_conceptnet_assertions)
  triples, ing = read(paths, pruned=config.kg.pruned,
                      on_bad_line=config.data.on_bad_line, progress=progress)
  if len(triples.head) == 0:  # nothing could ground or walk on it
    kept = ing.to_dict()
    raise DataError(", ".join(map(str, paths)), None, None,
                    f"no usable triple (read {kept.get('lines', 0)} lines; "
                    f"dropped {kept.get('dropped', {})}): the KG is empty")
  kg, built = store.build_graph(triples)
  return kg, {"source": config.kg.source, "files": [str(p) for p in paths],
              "ingest": ing.to_dict(), "build": built.to_dict()}


def load_or_build_kg(config, data_dir, out_dir: Path, log=print,
                     progress: bool = False
                     ) -> tuple[store.KnowledgeGraph, dict]:
  fmt, paths = datasets.kg_paths(config, data_dir)
  fp = _fingerprint(fmt, *paths, config.kg.to_dict(), store.FORMAT_VERSION)
  kg_path, meta_path = out_dir / "kg.npz", out_dir / "kg_report.json"
  meta = _read_meta(meta_path)
  if kg_path.exists() and meta and meta.get("fingerprint") == fp:
    log(f"reusing {kg_path}")
    return store.KnowledgeGraph.load(kg_path), meta
  log(f"building the KG store from {[str(p) for p in paths]}")
  kg, report = build_kg(config, data_dir, progress)
  kg.save(kg_path)
  report["fingerprint"] = fp
  write_json(meta_path, report)
  return store.KnowledgeGraph.load(kg_path), report


def _percentiles(x) -> dict:
  x = np.asarray(x)
  if x.size == 0:
    return {}
  p = np.percentile(x, [50, 90, 99])
  return {"mean": round(float(x.mean()), 2), "p50": round(float(p[0]), 1),
          "p90": round(float(p[1]), 1), "p99": round(float(p[2]), 1),
          "max": int(x.max())}


def check_choice_counts(examples, num_choices: int, path) -> None:
  """Refuses, naming the file, line and field, the first question with more
  choices than a batch holds (``batch.num_choices``)."""
  over = [e for e in examples if len(e.choices) > num_choices]
  if over:
    where, _, line = str(over[0].meta.get("source", f"{path}:")
                         ).rpartition(":")
    raise DataError(where, int(line) if line.isdigit() else None, "choices",
                    f"question {over[0].id!r} has {len(over[0].choices)} "
                    f"choices, and batch.num_choices={num_choices} holds at "
                    f"most {num_choices} ({len(over)} question(s) have more: "
                    "raise --config.batch.num_choices)")


def prepare_split(config, split: str, kg: store.KnowledgeGraph,
                  grounder: grounding.Grounder,
                  extractor: subgraph.SubgraphExtractor, data_dir,
                  out_dir: Path, progress: bool = True) -> dict:
  """Grounds one split, extracts its subgraphs, writes the cache, reports."""
  path = datasets.split_path(config, split, data_dir)
  examples, load_report = qa.load_jsonl(path,
                                        on_bad_line=config.data.on_bad_line)
  check_choice_counts(examples, config.batch.num_choices, path)
  grounded, subgraphs, hops = [], [], []
  flags = collections.Counter()
  for ex in tqdm.tqdm(examples, desc=f"{split}: ground + extract",
                      disable=not progress, unit="q"):
    g = grounder.ground(ex.stem, ex.choices)
    grounded.append(qa.Grounded(ex, g.question_concepts, g.choice_concepts,
                                g.flags))
    flags.update(f.split(":")[0] for f in g.flags)
    subgraphs.append(extractor.extract(g.question_concepts,
                                       g.choice_concepts))
    if ex.answer_index is not None:
      hops.append(extractor.hop_distance(
          g.question_concepts, g.choice_concepts[ex.answer_index],
          config.report.reach_hops))
  subgraph_cache.save_subgraphs(out_dir / f"{split}.subgraphs.npz", subgraphs,
                       config.subgraph.max_degree)
  subgraph_cache.write_grounded(out_dir / f"{split}.grounded.jsonl", grounded, kg)
  n = len(examples)
  n_choices = sum(len(g.choice_concepts) for g in grounded)
  hops = np.asarray(hops)
  buckets = [tuple(b) for b in config.batch.buckets]
  bucket_hist = collections.Counter()
  for s in subgraphs:
    b = choose_bucket(s.num_nodes, s.num_edges, buckets)
    bucket_hist["x".join(map(str, buckets[b])) if b >= 0 else "none"] += 1
  report = {
      "file": str(path), "load": load_report.to_dict(), "questions": n,
      "labeled": int(hops.size),
      "question_grounded": int(sum(g.question_concepts.size > 0
                                   for g in grounded)),
      "choices": n_choices,
      "choices_grounded": int(sum(c.size > 0 for g in grounded
                                  for c in g.choice_concepts)),
      "flags": dict(flags),
      "question_concepts": _percentiles([g.question_concepts.size
                                         for g in grounded]),
      "subgraph_nodes": _percentiles([s.num_nodes for s in subgraphs]),
      "subgraph_edges": _percentiles([s.num_edges for s in subgraphs]),
      "capped": {k: int(sum(s.stats[k] > 0 for s in subgraphs)) for k in (
          "dropped_nodes", "dropped_edges", "dropped_neighbors")},
      "buckets": dict(bucket_hist),
      "gold_hop_histogram": {str(k): int(v) for k, v in zip(
          *np.unique(hops, return_counts=True))} if hops.size else {},
  }
  for k in range(1, config.report.reach_hops + 1):
    reach = (hops >= 0) & (hops <= k)
    report[f"gold_reachable_within_{k}_hops"] = (
        float(reach.mean()) if hops.size else None)
  return report


def prepare(config, data_dir, out_dir, *, progress: bool = True,
            log: Callable[[str], None] = print) -> dict:
  """Runs the whole pipeline; returns the report (also in report.json)."""
  check_buckets(config)
  data_dir = datasets.resolve_data_dir(data_dir)
  out_dir = Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  kg, kg_report = load_or_build_kg(config, data_dir, out_dir, log, progress)
  grounder = grounding.Grounder(
      kg.concepts, max_concept_tokens=config.grounding.max_concept_tokens,
      max_candidates_per_span=config.grounding.max_candidates_per_span)
  extractor = subgraph.SubgraphExtractor(kg, **config.subgraph.to_dict())
  splits = {}
  for split in config.data.splits:
    path = datasets.split_path(config, split, data_dir)
    data_cfg = {k: v for k, v in config.data.to_dict().items()
                if k not in ("splits", "allow_ungrounded")}
    fp = _fingerprint(path, kg_report.get("fingerprint"), data_cfg,
                      config.grounding.to_dict(),
                      config.subgraph.to_dict(), config.report.to_dict(),
                      [tuple(b) for b in config.batch.buckets])
    meta_path = out_dir / f"{split}.meta.json"
    meta = _read_meta(meta_path)
    if (meta and meta.get("fingerprint") == fp and
        (out_dir / f"{split}.subgraphs.npz").exists()):
      log(f"{split}: reusing cached subgraphs in {out_dir}")
      splits[split] = meta["report"]
      continue
    splits[split] = prepare_split(config, split, kg, grounder, extractor,
                                  data_dir, out_dir, progress)
    write_json(meta_path, {"fingerprint": fp, "report": splits[split]})
  for split_report in splits.values():
    check_grounded(config, split_report, kg_report)
  report = summarize(kg_report, splits)
  report["grounder_index"] = dict(grounder.index_report)
  write_json(out_dir / "report.json", report)
  return report


def check_grounded(config, split_report: dict, kg_report: dict) -> None:
  """Refuses a split none of whose questions, or none of whose choices,
  grounds a concept of the KG: nothing could be walked or trained on it
  (``data.allow_ungrounded=True`` goes on)."""
  r = split_report
  if not r["questions"] or config.data.allow_ungrounded:
    return
  if r["question_grounded"] and r["choices_grounded"]:
    return
  raise ConfigError(
      f"{r['file']}: {r['question_grounded']} of its {r['questions']} "
      f"questions and {r['choices_grounded']} of its {r['choices']} choices "
      f"ground a concept of the KG {kg_report.get('files')} "
      f"(kg.source={config.kg.source!r}): the data and the KG do not match "
      "(--config.data.allow_ungrounded=True goes on)")


def summarize(kg_report: dict, splits: dict) -> dict:
  """Top-level figures over all splits (fractions weighted by questions)."""
  tot = lambda key: sum(s[key] for s in splits.values())
  questions, labeled = tot("questions"), tot("labeled")
  out = {
      "kg": {"concepts": kg_report["build"]["concepts"],
             "triples": kg_report["build"]["triples"],
             "edges_with_inverses": kg_report["build"]["edges_with_inverses"],
             "ingest_dropped": kg_report["ingest"]["dropped"]},
      "questions": questions,
      "question_grounded_fraction": tot("question_grounded") / max(questions,
                                                                   1),
      "choice_grounded_fraction": tot("choices_grounded") / max(
          tot("choices"), 1),
      "splits": splits,
  }
  hops = [k for k in splits[next(iter(splits))] if k.startswith(
      "gold_reachable_within_")] if splits else []
  for key in hops:
    num = sum((s[key] or 0) * s["labeled"] for s in splits.values())
    out[key] = num / labeled if labeled else None
  return out
