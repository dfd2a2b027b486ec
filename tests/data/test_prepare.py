"""The preparation pipeline and its command line, end to end."""

import json
import subprocess
import sys

import numpy as np
import pytest

from configs import demo as demo_config
from configs import test as test_config
from racer_jax.data import prepare, subgraph_cache
from racer_jax.errors import ConfigError, DataError
from racer_jax.kg import store
from racer_jax.kg.subgraph import SubgraphExtractor
from tests.conftest import REPO

FIGURES = ("questions", "question_grounded_fraction",
           "choice_grounded_fraction", "gold_reachable_within_2_hops")


def test_prepare_demo_writes_cache_and_reuses_it(tmp_path):
  config = test_config.get_config()
  logs = []
  report = prepare.prepare(config, None, tmp_path, progress=False,
                           log=logs.append)
  assert report["questions"] == 44
  assert report["question_grounded_fraction"] == 1.0
  assert report["gold_reachable_within_2_hops"] == 1.0
  for split in ("train", "dev"):
    assert report["splits"][split]["load"]["skipped"] == 0
  kg = store.KnowledgeGraph.load(tmp_path / "kg.npz")
  cached = subgraph_cache.load_subgraphs(tmp_path / "dev.subgraphs.npz")
  grounded = [json.loads(l) for l in open(tmp_path / "dev.grounded.jsonl")]
  assert len(cached) == len(grounded) == 12
  # The cache holds exactly what a fresh extraction gives.
  extractor = SubgraphExtractor(kg, **config.subgraph.to_dict())
  for sub, g in zip(cached, grounded):
    fresh = extractor.extract(
        [kg.concept_id(c) for c in g["question_concepts"]],
        [[kg.concept_id(c) for c in ch] for ch in g["choice_concepts"]])
    for field in ("nodes", "is_question", "choice_mask", "senders",
                  "receivers", "relation", "edge_id", "weight", "neighbors"):
      np.testing.assert_array_equal(getattr(sub, field), getattr(fresh, field))
    assert sub.stats == fresh.stats
  logs.clear()
  again = prepare.prepare(config, None, tmp_path, progress=False,
                          log=logs.append)
  assert sum("reusing" in l for l in logs) == 3  # kg + 2 splits
  assert again["splits"] == report["splits"]
  config.subgraph.max_hops = 1
  logs.clear()
  prepare.prepare(config, None, tmp_path, progress=False, log=logs.append)
  assert sum("reusing" in l for l in logs) == 1  # only the kg


def test_bad_lines_error_or_skip(tmp_path):
  good = (REPO / "racer_jax/data/demo/dev.jsonl").read_text().splitlines()
  path = tmp_path / "mixed.jsonl"
  path.write_text("\n".join(good[:3] + ['{"id": "broken", "question": 3}'] +
                            good[3:]) + "\n")
  config = test_config.get_config()
  config.data.dataset = "jsonl"
  config.data.splits = ("dev",)
  config.data.files = {"dev": str(path)}
  with pytest.raises(DataError) as err:
    prepare.prepare(config, None, tmp_path / "a", progress=False,
                    log=lambda _: None)
  assert err.value.line == 4 and err.value.field == "question"
  config.data.on_bad_line = "skip"
  report = prepare.prepare(config, None, tmp_path / "b", progress=False,
                           log=lambda _: None)
  assert report["questions"] == 12
  assert report["splits"]["dev"]["load"]["skipped"] == 1


@pytest.mark.parametrize("text", ["", "\n\n", "RelatedTo\tcat\n"])
def test_an_empty_kg_is_refused_at_once(tmp_path, text):
  """Issue 39: an empty KG (or one whose every line is dropped) used to
  prepare "0 concepts" and fail later in numpy."""
  kg = tmp_path / "kg.tsv"
  kg.write_text(text)
  config = test_config.get_config()
  config.kg.source, config.kg.path = "triples", str(kg)
  config.data.on_bad_line = "skip"
  with pytest.raises(DataError, match="kg.tsv: no usable triple"):
    prepare.prepare(config, None, tmp_path / "prep", progress=False,
                    log=lambda _: None)


def test_a_kg_that_grounds_no_question_is_refused(tmp_path):
  """Issue 51: a KG none of whose concepts occurs in the questions prepared
  "0.0%" without a word, and training then exited 0 having trained
  nothing."""
  kg = tmp_path / "kg.tsv"
  kg.write_text("isa\tzzqx\tqqwv\nusedfor\tqqwv\txxyzzy\n")
  config = test_config.get_config()
  config.kg.source, config.kg.path = "triples", str(kg)
  with pytest.raises(ConfigError, match=(
      r"train.jsonl: 0 of its 32 questions and 0 of its \d+ choices ground "
      r"a concept of the KG \[.*kg.tsv'\] \(kg.source='triples'\): the "
      r"data and the KG do not match \(--config.data.allow_ungrounded=True "
      r"goes on\)")):
    prepare.prepare(config, None, tmp_path / "prep", progress=False,
                    log=lambda _: None)
  config.data.allow_ungrounded = True
  report = prepare.prepare(config, None, tmp_path / "prep", progress=False,
                           log=lambda _: None)
  assert report["question_grounded_fraction"] == 0.0


def test_a_question_with_more_choices_than_a_batch_is_named(tmp_path):
  """Issue 51: a question with more choices than batch.num_choices failed
  with no file, line or field to change."""
  lines = (REPO / "racer_jax/data/demo/dev.jsonl").read_text().splitlines()
  wide = json.loads(lines[2])
  wide["question"]["choices"] += [{"label": "F", "text": "garage"}]
  path = tmp_path / "wide.jsonl"
  path.write_text("\n".join(lines[:2] + [json.dumps(wide)]) + "\n")
  config = test_config.get_config()
  config.data.dataset, config.data.splits = "jsonl", ("dev",)
  config.data.files = {"dev": str(path)}
  with pytest.raises(DataError, match=(
      rf"wide.jsonl:3: field 'choices' question '{wide['id']}' has 6 choices,"
      r" and batch.num_choices=5 holds at most 5 \(1 question\(s\) have "
      r"more: raise --config.batch.num_choices\)")):
    prepare.prepare(config, None, tmp_path / "prep", progress=False,
                    log=lambda _: None)


def test_config_errors(tmp_path, monkeypatch):
  monkeypatch.delenv("RACER_DATA_DIR", raising=False)
  config = test_config.get_config()
  config.subgraph.max_nodes = 1000
  with pytest.raises(ConfigError, match="buckets"):
    prepare.prepare(config, None, tmp_path, progress=False)
  config = test_config.get_config()
  config.kg.source = "cn100k"
  with pytest.raises(ConfigError, match="data directory"):
    prepare.prepare(config, "", tmp_path, progress=False)


def test_cli_demo_prints_json_last(tmp_path):
  out = subprocess.run(
      [sys.executable, str(REPO / "launch/prepare.py"),
       "--config=" + str(REPO / "configs/demo.py"), f"--out_dir={tmp_path}",
       "--progress=false", "--config.subgraph.max_hops=3"],
      capture_output=True, text=True, check=True, cwd=tmp_path)
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  for key in FIGURES:
    assert key in figures
  assert figures["questions"] == 44
  assert (tmp_path / "report.json").exists()


def test_demo_config_budgets_fit():
  prepare.check_buckets(demo_config.get_config())


@pytest.mark.data
def test_csqa_dev_on_cn100k(data_dir, tmp_path):
  from configs import csqa
  config = csqa.get_config()
  config.data.splits = ("dev",)
  report = prepare.prepare(config, data_dir, tmp_path, progress=False,
                           log=lambda _: None)
  dev = report["splits"]["dev"]
  print({k: v for k, v in dev.items() if k.startswith("gold_")})
  assert dev["questions"] == 834 and dev["labeled"] == 834
  # Measured 2026-11-30: 0.513 / 0.793 / 0.905 of gold answers within
  # 1 / 2 / 3 hops of a question concept on CN-100K.
  assert 0.45 <= dev["gold_reachable_within_1_hops"] <= 0.56
  assert 0.75 <= dev["gold_reachable_within_2_hops"] <= 0.84
  assert dev["gold_reachable_within_3_hops"] >= 0.87
  assert dev["buckets"] and "none" not in dev["buckets"]


@pytest.mark.data
def test_benchmark_prepare_small(data_dir):
  out = subprocess.run(
      [sys.executable, str(REPO / "launch/benchmark.py"), "prepare",
       f"--data_dir={data_dir}", "--fullsize_concepts=20000",
       "--fullsize_triples=60000", "--fullsize_questions=50",
       "--reference_questions=20"],
      capture_output=True, text=True, check=True)
  figures = json.loads(out.stdout.strip().splitlines()[-1])
  for key in ("csqa_cn100k_seconds", "fullsize_load_seconds",
              "fullsize_questions_per_second", "peak_rss_gb",
              "extraction_speedup_vs_python_reference"):
    assert figures[key] > 0
  assert figures["csqa_questions"] == 9741 + 834 + 1140
  assert figures["fullsize_concepts"] == 20000
