"""Where each dataset split and knowledge graph source lives.

Paths are relative to the data directory (``--data_dir`` / ``RACER_DATA_DIR``)
laid out as the README's "Real data" section shows; the demo set ships inside
the package.
"""

from __future__ import annotations

import os
from pathlib import Path

from racer_jax.errors import ConfigError

DEMO_DIR = Path(__file__).resolve().parent / "demo"

SPLITS: dict[str, dict[str, str]] = {
    "csqa": {"train": "csqa/train_rand_split.jsonl",
             "dev": "csqa/dev_rand_split.shared.jsonl",
             "test": "csqa/test_rand_split_no_answers.jsonl"},
    "obqa": {"train": "obqa/Main/train.jsonl", "dev": "obqa/Main/dev.jsonl",
             "test": "obqa/Main/test.jsonl"},
    "obqa_additional": {"train": "obqa/Additional/train_hf.jsonl",
                        "dev": "obqa/Additional/dev_hf.jsonl",
                        "test": "obqa/Additional/test_hf.jsonl"},
    "demo": {"train": str(DEMO_DIR / "train.jsonl"),
             "dev": str(DEMO_DIR / "dev.jsonl")},
}


def resolve_data_dir(data_dir: str | None) -> Path | None:
  """``data_dir``, else ``$RACER_DATA_DIR``, else None."""
  value = data_dir or os.environ.get("RACER_DATA_DIR") or None
  return Path(value).expanduser() if value else None


def need_dir(data_dir: Path | None, what: str) -> Path:
  if data_dir is None:
    raise ConfigError(f"{what} needs a data directory: pass --data_dir or set "
                      "RACER_DATA_DIR (the demo config needs neither)")
  if not data_dir.is_dir():
    raise ConfigError(f"data directory {data_dir} does not exist")
  return data_dir


def split_path(config, split: str, data_dir: Path | None) -> Path:
  """Path of one split of ``config.data.dataset``."""
  dataset = config.data.dataset
  if dataset == "jsonl":
    files = {k: v for k, v in dict(config.data.files).items() if v}
    if split not in files:
      raise ConfigError(f"data.files.{split} is not set (dataset=jsonl: "
                        f"--config.data.files.{split}=PATH; set: "
                        f"{sorted(files)})")
    path = Path(files[split]).expanduser()
  elif dataset in SPLITS:
    if split not in SPLITS[dataset]:
      raise ConfigError(f"dataset {dataset!r} has no split {split!r} "
                        f"(has {sorted(SPLITS[dataset])})")
    rel = SPLITS[dataset][split]
    path = Path(rel) if dataset == "demo" else (
        need_dir(data_dir, f"dataset {dataset!r}") / rel)
  else:
    raise ConfigError(f"data.dataset={dataset!r}; expected one of "
                      f"{sorted(SPLITS) + ['jsonl']}")
  if not path.is_file():
    raise ConfigError(f"{dataset}/{split}: file {path} not found")
  return path


def kg_paths(config, data_dir: Path | None) -> tuple[str, list[Path]]:
  """``(format, paths)`` of the KG source; format is "triples"/"assertions"."""
  source = config.kg.source
  if source == "demo":
    paths, fmt = [DEMO_DIR / "kg.tsv"], "triples"
  elif source == "cn100k":
    base = need_dir(data_dir, "kg.source='cn100k'") / "conceptnet" / "cn100k"
    paths, fmt = [base / f for f in config.kg.cn100k_files], "triples"
  elif source in ("assertions", "triples"):
    if not config.kg.path:
      raise ConfigError(f"kg.source={source!r} needs kg.path")
    paths = [Path(p).expanduser() for p in str(config.kg.path).split(",")]
    fmt = source
  else:
    raise ConfigError(f"kg.source={source!r}; expected demo, cn100k, "
                      "assertions or triples")
  for p in paths:
    if not p.is_file():
      raise ConfigError(f"KG file {p} not found")
  return fmt, paths
