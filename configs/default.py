"""Default configuration: CommonsenseQA over CN-100K.

Every launch command takes ``--config=configs/<name>.py`` and command-line
overrides such as ``--config.subgraph.max_hops=3``.
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.seed = 0

  # Dataset: "demo" (bundled), "csqa", "obqa", "obqa_additional", or "jsonl"
  # with data.files = {"split": "path", ...}.
  config.data = ml_collections.ConfigDict()
  config.data.dataset = "csqa"
  config.data.splits = ("train", "dev", "test")
  config.data.files = ml_collections.ConfigDict()  # only for dataset="jsonl"
  config.data.on_bad_line = "error"  # or "skip" (skipped lines are counted)

  # Knowledge graph: "demo" (bundled), "cn100k" (data_dir/conceptnet/cn100k),
  # "assertions" (official ConceptNet 5 dump at kg.path) or "triples" (path).
  config.kg = ml_collections.ConfigDict()
  config.kg.source = "cn100k"
  config.kg.path = ""
  config.kg.cn100k_files = ("train.txt",)
  config.kg.pruned = False  # drop hascontext + blacklisted hub concepts

  config.grounding = ml_collections.ConfigDict()
  config.grounding.max_concept_tokens = 4
  config.grounding.max_candidates_per_span = 3

  config.subgraph = ml_collections.ConfigDict()
  config.subgraph.max_hops = 2
  config.subgraph.max_nodes = 200
  config.subgraph.max_edges = 4096
  config.subgraph.max_degree = 32

  # Shape buckets (nodes incl. >= 1 padding node, edges). Must cover
  # (max_nodes + 1, max_edges) so that every subgraph fits one.
  config.batch = ml_collections.ConfigDict()
  config.batch.batch_size = 32
  config.batch.num_choices = 5
  config.batch.buckets = ((32, 128), (64, 512), (128, 1536), (256, 4096))

  config.report = ml_collections.ConfigDict()
  config.report.reach_hops = 3
  return config
