"""A run's saved config read in one place: a missing or broken one names
the file and the run it was expected to be (issue 39)."""

import json

import pytest

from configs import test as test_config
from racer_jax.errors import ConfigError
from racer_jax.runs import run_config


def test_a_saved_config_loads(tmp_path):
  config = json.loads(test_config.get_config().to_json())
  config["seed"], config["train"]["stage"] = 3, "answer"
  (tmp_path / "config.json").write_text(json.dumps(config))
  loaded = run_config.load(tmp_path, "answer run")
  assert (loaded.seed, loaded.train.stage) == (3, "answer")


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
  config.train.p_teacher_final = config.train.p_teacher  # no schedule
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
  more, record = [json.loads(x) for x in (tmp_path / run_config.CHANGES
                                          ).read_text().splitlines()]
  assert more["changed"] == {} and more["resumed_with"] == {
      "train.num_steps": [config.train.num_steps - 100,
                          config.train.num_steps]}
  assert record["changed"] == {"train.learning_rate": [
      config.train.learning_rate, 0.01]}


def test_more_steps_are_refused_where_the_schedule_follows_them(tmp_path):
  """Issue 51: a resume with a larger train.num_steps was taken silently,
  but the teacher probability decays over num_steps: p_teacher jumped from
  0.144 at step 50 to 0.282 at step 60 and nothing recorded it."""
  config = test_config.get_config()
  config.train.p_teacher, config.train.p_teacher_final = 0.5, 0.1
  run_config.save(config, tmp_path, "walker")
  more = config.copy_and_resolve_references()
  more.train.num_steps += 50
  with pytest.raises(ConfigError, match=(
      r"train.num_steps: \d+ -> \d+ — train.num_steps sets the teacher "
      r"probability's decay \(0.5 -> 0.1\), and the steps trained so far "
      rf"followed the {config.train.num_steps}-step schedule")):
    run_config.save(more, tmp_path, "walker")
  assert not (tmp_path / run_config.CHANGES).exists()
  # the curriculum's pacing follows them too
  flat = config.copy_and_resolve_references()
  flat.train.p_teacher_final = 0.5
  flat.curriculum.enabled = True
  assert run_config.num_steps_schedules(json.loads(flat.to_json()),
                                        "walker") == ["the curriculum's pacing"]
  assert run_config.num_steps_schedules(json.loads(flat.to_json()),
                                        "refiner") == []
  # accepted on purpose, it is recorded as a change
  more.train.accept_config_change = True
  run_config.save(more, tmp_path, "walker")
  [record] = [json.loads(x) for x in (tmp_path / run_config.CHANGES
                                      ).read_text().splitlines()]
  assert record["changed"] == {"train.num_steps": [config.train.num_steps,
                                                   more.train.num_steps]}


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
  config.train.p_teacher_final = config.train.p_teacher  # no schedule
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


@pytest.mark.parametrize("section", ["answer", "agents", "kg"])
def test_a_config_json_missing_a_section_is_named(tmp_path, section):
  """Issue 51: a config.json without `answer` ended in AttributeError;
  without `agents` or `kg` the run went on silently on defaults."""
  config = json.loads(test_config.get_config().to_json())
  del config[section]
  (tmp_path / "config.json").write_text(json.dumps(config))
  with pytest.raises(ConfigError, match=(
      rf"config.json: the answer run's config lacks the section\(s\) "
      rf"{section} \(")):
    run_config.load(tmp_path, "answer run")


def test_a_stage_resumes_past_changes_to_fields_it_does_not_read(tmp_path):
  """Issue 51: main.py with only an answer.* change was refused at the
  walker stage ("trained with another config"): the walker and refiner
  never read the answer section, but its validation slice they leave out."""
  config = test_config.get_config()
  for stage in ("walker", "refiner", "answer"):
    (tmp_path / stage).mkdir()
    run_config.save(config, tmp_path / stage, stage)
  answer = config.copy_and_resolve_references()
  answer.answer.epochs += 1
  answer.agents.max_turns += 1
  for stage in ("walker", "refiner"):
    run_config.save(answer, tmp_path / stage, stage)
  with pytest.raises(ConfigError, match="answer.epochs"):
    run_config.save(answer, tmp_path / "answer", "answer")
  walker = config.copy_and_resolve_references()
  walker.walker.hidden += 8
  with pytest.raises(ConfigError, match="walker.hidden"):
    run_config.save(walker, tmp_path / "walker", "walker")
  held_out = config.copy_and_resolve_references()
  held_out.answer.validation_fraction = 0.3
  for stage in ("walker", "refiner"):
    with pytest.raises(ConfigError, match="answer.validation_fraction"):
      run_config.save(held_out, tmp_path / stage, stage)


def _saved_without(tmp_path, *fields):
  saved = tmp_path / "config.json"
  config = json.loads(saved.read_text() if saved.exists() else
                      test_config.get_config().to_json())
  for field in fields:
    *sections, name = field.split(".")
    node = config
    for s in sections:
      node = node[s]
    del node[name]
  (tmp_path / "config.json").write_text(json.dumps(config))
  return config


def test_a_run_saved_before_a_field_loads_with_what_it_trained_with(tmp_path):
  """Issue 52: a field added since a run was saved is filled once, on
  load, with the value that run trained with (run_config.LEGACY) where
  today's default differs, else today's default; the library reads every
  field directly."""
  _saved_without(tmp_path, "refiner.beta", "walker.teacher_stops",
                 "refiner.mix", "multihop.fallback_seeds")
  loaded = run_config.load(tmp_path, "refiner run")
  today = test_config.get_config()
  assert today.refiner.beta == "intrinsic"
  assert loaded.refiner.beta == "query"          # what it trained with
  assert loaded.walker.teacher_stops is True
  assert loaded.multihop.fallback_seeds == 0
  assert loaded.refiner.mix == today.refiner.mix  # unchanged since
  # a section added since, which the run never read: today's defaults
  _saved_without(tmp_path, "multihop")
  loaded = run_config.load(tmp_path, "refiner run")
  assert loaded.multihop.fallback_seeds == today.multihop.fallback_seeds
  # every field of today's schema is there
  want = run_config._flat(json.loads(test_config.get_config().to_json()))
  got = run_config._flat(json.loads(loaded.to_json()))
  assert set(want) <= set(got)


def test_a_resume_compares_a_missing_field_with_what_the_run_trained_with(
    tmp_path):
  config = test_config.get_config()
  run_config.save(config, tmp_path, "refiner")
  _saved_without(tmp_path, "refiner.beta", "multihop")
  with pytest.raises(ConfigError, match="refiner.beta: 'query' -> "
                     "'intrinsic'"):
    run_config.save(config, tmp_path, "refiner")
  config.refiner.beta = "query"    # the same work: resumes, nothing changed
  run_config.save(config, tmp_path, "refiner")
  assert not (tmp_path / run_config.CHANGES).exists()


def _saved_with(tmp_path, stage: str, method: str, **sections):
  config = json.loads(test_config.get_config().to_json())
  config["train"]["stage"] = config["stage"] = stage
  config["method"] = method
  for section, values in sections.items():
    config[section].update(values)
  (tmp_path / "config.json").write_text(json.dumps(config))


def test_runs_saved_with_retired_fields(tmp_path):
  """Issue 52 retired the subgraph walker: a walker run it trained is
  refused by name; a field that did not apply to its run (HyGRL, a walker
  already on the whole graph) is dropped."""
  _saved_with(tmp_path, "walker", "racer", walker={"graph": "subgraph"})
  with pytest.raises(ConfigError, match=r"config.json: walker.graph="
                     r"'subgraph': this walker run was trained with the "
                     r"subgraph walker"):
    run_config.load(tmp_path, "walker run")
  _saved_with(tmp_path, "walker", "racer", walker={
      "graph": "kg", "heuristic_weight": 0.0}, batch={"shards": 0})
  loaded = run_config.load(tmp_path, "walker run")
  assert "graph" not in loaded.walker and "shards" not in loaded.batch
  _saved_with(tmp_path, "walker", "hygrl", walker={
      "graph": "subgraph", "heuristic_weight": 1.0}, batch={"shards": 2})
  loaded = run_config.load(tmp_path, "HyGRL run")
  assert "heuristic_weight" not in loaded.walker
  run_config.save(loaded, tmp_path, "walker")  # resumes: nothing changed
  assert not (tmp_path / run_config.CHANGES).exists()


def _config_reads_with_a_fallback() -> list[str]:
  """``X.get("field", ...)`` in the library where "field" is a config
  field or section and X is a config or one of its sections."""
  import ast
  import re
  from tests.conftest import REPO
  names = set()
  for field in run_config._flat(json.loads(
      test_config.get_config().to_json())):
    names.update(field.split("."))
  config_like = re.compile(
      r"config|cfg|^(agents|self\.agents|stack\.agents)$|"
      r"\.(answer|agents|walker|refiner|hygrl|multihop|memory|train|batch|"
      r"text|data|eval|reranker|curriculum|openbook|reward|kg|subgraph)$")
  section_alias = re.compile(r"^[a-z]$")  # w = config.walker, h = …
  found = []
  for path in sorted((REPO / "racer_jax").rglob("*.py")):
    src = path.read_text()
    aliases = set()
    tree = ast.parse(src)
    for node in ast.walk(tree):   # one-letter names bound to a section
      if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        continue
      pairs = [(node.targets[0], node.value)]
      if isinstance(node.targets[0], ast.Tuple) and isinstance(
          node.value, ast.Tuple):           # a, t = config.answer, …
        pairs = zip(node.targets[0].elts, node.value.elts)
      for target, value in pairs:
        if (isinstance(target, ast.Name) and section_alias.match(target.id)
            and config_like.search(ast.get_source_segment(src, value))):
          aliases.add(target.id)
    for node in ast.walk(tree):
      if not (isinstance(node, ast.Call) and
              isinstance(node.func, ast.Attribute) and
              node.func.attr == "get" and node.args and
              isinstance(node.args[0], ast.Constant) and
              node.args[0].value in names):
        continue
      receiver = ast.get_source_segment(src, node.func.value)
      if config_like.search(receiver) or receiver in aliases:
        found.append(f"{path.relative_to(REPO)}:{node.lineno}: "
                     f"{ast.get_source_segment(src, node)}")
  return found


def test_the_library_reads_no_config_field_with_a_fallback():
  """Issue 52: a fallback beside the default made what a run does depend
  on when it was saved (two defaults per field); saved runs are upgraded
  on load instead."""
  assert _config_reads_with_a_fallback() == []
