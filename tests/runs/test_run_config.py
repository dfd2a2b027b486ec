"""A run's saved config read in one place: a missing or broken one names
the file and the run it was expected to be (issue 39)."""

import json

import pytest

from configs import test as test_config
from racer_jax.errors import ConfigError
from racer_jax.runs import run_config


def test_a_saved_config_loads(tmp_path):
  (tmp_path / "config.json").write_text('{"seed": 3, "train": {"stage": '
                                        '"answer"}}')
  assert run_config.load(tmp_path, "answer run").train.stage == "answer"


def test_a_broken_config_names_its_file_line_and_column(tmp_path):
  (tmp_path / "config.json").write_text('{\n "seed": 3,\n "train": }\n')
  with pytest.raises(ConfigError) as e:
    run_config.load(tmp_path, "refiner run")
  assert str(e.value).startswith(f"{tmp_path / 'config.json'}:3:11: the "
                                 "refiner run's config is not valid JSON")


def test_a_missing_run_is_named(tmp_path):
  with pytest.raises(ConfigError, match="the walker run .*gone does not "
                     "exist"):
    run_config.load(tmp_path / "gone", "walker run")
  (tmp_path / "empty").mkdir()
  with pytest.raises(ConfigError, match="empty has none"):
    run_config.load(tmp_path / "empty", "walker run")
  (tmp_path / "config.json").write_text("[1, 2]")
  with pytest.raises(ConfigError, match="not a JSON object"):
    run_config.load(tmp_path)


def test_a_resume_with_another_config_is_refused_naming_the_fields(tmp_path):
  """Issue 39: a resume with --config.train.learning_rate=0.01 rewrote
  config.json silently; it no longer said what trained the checkpoints."""
  config = test_config.get_config()
  run_config.save(config, tmp_path, "walker")
  config.train.num_steps += 100  # more steps: the same work, continued
  run_config.save(config, tmp_path, "walker")
  changed = config.copy_and_resolve_references()
  changed.train.learning_rate = 0.01
  with pytest.raises(ConfigError, match="train.learning_rate: .* -> 0.01"):
    run_config.save(changed, tmp_path, "walker")
  assert run_config.load(tmp_path).train.learning_rate == \
      config.train.learning_rate  # untouched
  changed.train.accept_config_change = True
  run_config.save(changed, tmp_path, "walker")
  assert run_config.load(tmp_path).train.learning_rate == 0.01
  [record] = [json.loads(x) for x in (tmp_path / run_config.CHANGES
                                      ).read_text().splitlines()]
  assert record["changed"] == {"train.learning_rate": [
      config.train.learning_rate, 0.01]}


def _main_job_layout(root):
  """The main job's folders: walker, refiner, answer runs, shared prep."""
  config = test_config.get_config()
  for name in ("walker", "refiner", "answer", "prep"):
    (root / name).mkdir(parents=True)
  config.prep_dir = str(root / "prep")
  config.refiner.walker_workdir = str(root / "walker")
  run_config.save(config, root / "refiner", "refiner")
  config.answer.knowledge_workdir = str(root / "refiner")
  run_config.save(config, root / "answer", "answer")


def test_a_copied_job_folder_reads_its_own_runs(tmp_path):
  """Issue 39: answer.py on a copied folder failed on
  /old/path/refiner/config.json."""
  import shutil
  _main_job_layout(tmp_path / "old")
  saved = json.loads((tmp_path / "old" / "answer" / "config.json"
                      ).read_text())
  assert saved["answer"]["knowledge_workdir"] == "../refiner"
  shutil.copytree(tmp_path / "old", tmp_path / "new")
  shutil.rmtree(tmp_path / "old")
  answer = run_config.load(tmp_path / "new" / "answer")
  assert answer.answer.knowledge_workdir == str(tmp_path / "new" / "refiner")
  assert answer.prep_dir == str(tmp_path / "new" / "prep")
  refiner = run_config.load(answer.answer.knowledge_workdir)
  assert refiner.refiner.walker_workdir == str(tmp_path / "new" / "walker")


def test_a_run_moved_alone_still_finds_the_runs_it_names(tmp_path):
  _main_job_layout(tmp_path / "job")
  (tmp_path / "elsewhere").mkdir()
  (tmp_path / "job" / "answer").rename(tmp_path / "elsewhere" / "answer")
  answer = run_config.load(tmp_path / "elsewhere" / "answer")
  assert answer.answer.knowledge_workdir == str(tmp_path / "job" /
                                                "refiner")


def test_a_missing_run_it_names_is_said(tmp_path):
  import shutil
  _main_job_layout(tmp_path / "job")
  shutil.rmtree(tmp_path / "job" / "refiner")
  answer = run_config.load(tmp_path / "job" / "answer")
  with pytest.raises(ConfigError, match="refiner run .*refiner does not "
                     "exist"):
    run_config.load(answer.answer.knowledge_workdir, "refiner run")


def test_a_moved_job_resumes_without_a_false_config_change(tmp_path):
  import shutil
  _main_job_layout(tmp_path / "old")
  shutil.move(tmp_path / "old", tmp_path / "new")
  config = run_config.load(tmp_path / "new" / "answer")
  run_config.save(config, tmp_path / "new" / "answer", "answer")  # no error


def test_each_start_and_resume_records_the_machine_and_xla_flags(
    tmp_path, monkeypatch):
  """The same config and seed give bit-identical runs only with the same
  XLA flags (256- or 512-bit vector code reassociates sums): each start
  and resume says which were in force; a refused resume records nothing."""
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=512")
  config = test_config.get_config()
  run_config.save(config, tmp_path, "walker")
  config.train.num_steps += 100
  run_config.save(config, tmp_path, "walker")
  config.train.learning_rate = 0.5
  with pytest.raises(ConfigError):
    run_config.save(config, tmp_path, "walker")
  entries = [json.loads(x) for x in
             (tmp_path / "environment.jsonl").read_text().splitlines()]
  assert len(entries) == 2
  for e in entries:
    assert e["stage"] == "walker"
    assert e["xla_flags"] == "--xla_cpu_prefer_vector_width=512"
    assert e["jax_version"] and e["device"] and e["cpu_count"] >= 1
