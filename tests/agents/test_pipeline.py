"""New questions end to end: grounding, subgraph, the loop, and
``launch/answer.py`` printing the answer and its reasoning paths."""

import json
import subprocess
import sys

import pytest

from racer_jax.agents.pipeline import Pipeline
from tests.conftest import REPO

QUESTION = "Where would a bird fly to sleep at night?"
CHOICES = ["nest", "ocean", "oven", "library"]


@pytest.mark.slow  # 30 s to 3 min on 2 cores: keeps the default run under 10 min
def test_pipeline_answers_a_new_question(answer_run, demo_workspace):
  _, workdir = answer_run
  pipeline = Pipeline(workdir, log=lambda _: None)
  result = pipeline.answer(QUESTION, CHOICES + [" "])  # blank choice dropped
  assert result.choices == CHOICES and 0 <= result.prediction < 4
  assert 1 <= len(result.rounds) <= 3
  kg = demo_workspace.kg
  for t, verified in result.triples_shown():
    assert verified and kg.has_edge(t.head, t.relation, t.tail)
  with pytest.raises(ValueError, match="choices"):
    pipeline.answer(QUESTION, ["only one"])


@pytest.mark.slow  # a subprocess that loads the whole stack
def test_answer_cli_text_and_json(answer_run):
  _, workdir = answer_run
  base = [sys.executable, str(REPO / "launch/answer.py"),
          f"--workdir={workdir}", f"--question={QUESTION}",
          f"--choices={','.join(CHOICES)}"]
  text = subprocess.run(base, capture_output=True, text=True, cwd=workdir)
  assert text.returncode == 0, text.stderr[-3000:]
  assert "answer:" in text.stdout and "round 1" in text.stdout
  assert "reasoning paths for the answer:" in text.stdout
  out = subprocess.run(base + ["--format=json"], capture_output=True,
                       text=True, cwd=workdir)
  assert out.returncode == 0, out.stderr[-3000:]
  record = json.loads(out.stdout.strip().splitlines()[-1])
  assert record["choices"] == CHOICES
  assert record["llm"]["llm_calls"] == 0
  assert record["rounds"][0]["verdict"] in ("ACCEPT", "UNSURE")
  # the prompts an LLM backend would be sent, without a key or a call
  dry = subprocess.run(base + ["--backend=gemini", "--dry_run"],
                       capture_output=True, text=True, cwd=workdir,
                       env={k: v for k, v in __import__("os").environ.items()
                            if k not in ("GEMINI_API_KEY", "GOOGLE_API_KEY")})
  assert dry.returncode == 0, dry.stderr[-3000:]
  summary = json.loads(dry.stdout.strip().splitlines()[-1])
  assert summary["dry_run"] and summary["generate_calls_made"] == 0
  assert summary["token_count"] == "estimate" and summary["llm_calls"] >= 1
  assert "===== call 1: answer" in dry.stdout
  assert f"Question: {QUESTION}" in dry.stdout
  assert dry.stdout.count("Example ") >= 3  # few-shot examples shown
  # a dry run needs a backend to show (refused before the run is loaded;
  # in-process: a fourth launcher start costs ~20 s)
  from racer_jax.errors import ConfigError
  from racer_jax.eval import answer_one
  with pytest.raises(ConfigError, match="--backend=gemini"):
    answer_one.open_pipeline(workdir, dry_run=True)
