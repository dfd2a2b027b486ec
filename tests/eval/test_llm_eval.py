"""The four agents' evaluation with an LLM in the Answer and Critic seats:
end to end on a real model behind a real server (llama.cpp + SmolLM2-135M,
tests/real_llm.py), the dry run against the calls the real run then makes,
``launch/evaluate.py`` with ``--backend/--model/--base_url``, and (against
the OpenAI stub) a run whose answers mostly did not come from the LLM."""

import json
import shutil
import subprocess
import sys

import pytest

from racer_jax.errors import LLMError
from racer_jax.eval import agents_eval
from racer_jax.llm import llm, llm_backends
from racer_jax.train import evaluate_run
from tests.llm.stub_openai import StubOpenAI, completion
from tests.conftest import REPO
from tests.real_llm import MODEL_ALIAS

pytestmark = pytest.mark.slow
QUIET = dict(progress=False, log=lambda _: None)
KNOWN = set(llm.TRANSIENT) | set(llm.REPLY_ERRORS)


def _copy(head_run, tmp_path, name):
  config, workdir = head_run
  dst = tmp_path / name
  shutil.copytree(workdir, dst, ignore=shutil.ignore_patterns("eval"))
  config = config.copy_and_resolve_references()
  config.eval.batch_size = 8   # each pass one batch of the 4 questions
  return config, dst


def _agents(config, url, max_turns=3, model=MODEL_ALIAS, **settings):
  agents = llm_backends.evaluation_agents(
      config, backend="openai", model=model, base_url=url,
      settings=[f"{k}={v}" for k, v in settings.items()])
  agents.max_turns = max_turns
  return agents


@pytest.mark.xdist_group("llama")
def test_four_agents_on_a_real_model(head_run, llama_server, tmp_path):
  config, workdir = _copy(head_run, tmp_path, "real")
  agents = _agents(config, llama_server)
  figures = agents_eval.evaluate(config, None, workdir, seeds=1,
                                 agents=agents, max_questions=4, **QUIET)
  assert (figures["backend"], figures["model"], figures["base_url"]) == (
      "openai", MODEL_ALIAS, llama_server)
  assert 0.0 <= figures["llm_answered_fraction"] <= 1.0
  assert set(figures["llm_errors"]) <= KNOWN
  usage = figures["llm"]
  assert usage["per_agent"]["answer"]["calls"] >= 8  # two passes
  assert usage["per_agent"]["critic"]["calls"] >= 4
  out = workdir / "eval" / "dev.openai-smollm2.first4"
  assert figures["name"] == "dev.openai-smollm2.first4"
  rows = [json.loads(x) for x in (out / "full.seed0.jsonl").read_text(
      ).splitlines()]
  for row in rows:
    assert row["llm"]["model"] == MODEL_ALIAS
    for rd in row["rounds"]:
      for call, backend in ((rd["answer_llm"], rd["answer_backend"]),
                            (rd["critic_llm"], rd["critic_backend"])):
        if call is None:
          continue
        # each reply parsed under the schema, or its failure categorized
        assert (call["error"] is None) == (backend == "openai")
        assert call["error"] is None or call["error"] in KNOWN
  answered = sum(r["answered_by"] == "openai" for r in rows) / len(rows)
  assert figures["llm_answered_fraction"] == pytest.approx(answered)
  first = (out / "report.md").read_text().splitlines()[0]
  assert "LLM RESULT" in first.upper() and MODEL_ALIAS in first
  again = agents_eval.evaluate(config, None, workdir, seeds=1,
                               agents=agents, max_questions=4, **QUIET)
  assert again["llm"]["llm_new_calls"] == 0  # the cache answers it all
  assert again["accuracy"] == figures["accuracy"]


@pytest.mark.xdist_group("llama")
def test_dry_run_counts_the_calls_the_real_run_makes(head_run, llama_server,
                                                     tmp_path):
  config, workdir = _copy(head_run, tmp_path, "dry")
  agents = _agents(config, llama_server, max_turns=1)
  dry = agents_eval.evaluate(config, None, workdir, seeds=1, agents=agents,
                             max_questions=4, dry_run=True, **QUIET)
  assert dry["token_count"] == "server_tokenizer"
  assert dry["model_check"] == "listed" and dry["generate_calls_made"] == 0
  real = agents_eval.evaluate(config, None, workdir, seeds=1, agents=agents,
                              max_questions=4, **QUIET)
  assert real["llm"]["llm_new_calls"] == dry["llm_new_calls"] > 0
  # the server's usage counts the chat template's tokens too
  extra = real["llm"]["input_tokens"] - dry["input_tokens"]
  assert 0 <= extra <= 20 * dry["llm_new_calls"]
  # issue 51: once the real run cached every reply, a dry run still counts
  # the prompts' tokens, beside the 0 it would send
  again = agents_eval.evaluate(config, None, workdir, seeds=1, agents=agents,
                               max_questions=4, dry_run=True, **QUIET)
  assert again["llm_new_calls"] == 0 and again["input_tokens"] == 0
  assert again["input_tokens_all_prompts"] == \
      dry["input_tokens_all_prompts"] >= dry["input_tokens"] > 0


@pytest.mark.xdist_group("llama")
def test_launch_evaluate_with_backend_model_and_base_url(head_run,
                                                         llama_server,
                                                         tmp_path):
  _, workdir = _copy(head_run, tmp_path, "launch")
  run = subprocess.run(
      [sys.executable, "launch/evaluate.py", f"--workdir={workdir}",
       "--backend=openai", f"--base_url={llama_server}",
       f"--model={MODEL_ALIAS}", "--max_questions=3", "--seeds=1",
       "--progress=false"], cwd=REPO, capture_output=True, text=True,
      timeout=900)
  assert run.returncode == 0, run.stderr[-3000:]
  last = json.loads(run.stdout.strip().splitlines()[-1])
  for key in ("backend", "model", "base_url", "llm_answered_fraction",
              "llm_errors"):
    assert key in last, key
  assert (last["backend"], last["model"], last["base_url"]) == (
      "openai", MODEL_ALIAS, llama_server)
  # the printed summary opens with who answered, and how much
  assert any(line.startswith(("LLM result: openai model `smollm2`",
                              "NOT AN LLM RESULT: openai model `smollm2`"))
             for line in run.stdout.splitlines())


def test_failed_llm_answers_are_no_llm_result(head_run, tmp_path):
  """A server whose replies are all cut: every answer falls back, the
  report's first line says the accuracy is not the LLM's, and
  --require_llm is an error after the records are saved."""
  config, workdir = _copy(head_run, tmp_path, "stub")
  with StubOpenAI() as stub:
    cut = completion('{"answer": ', finish="length")
    stub.script.extend([(200, cut, 0)] * 200)
    agents = _agents(config, stub.url, model="stub-model")
    figures = agents_eval.evaluate(config, None, workdir, seeds=1,
                                   agents=agents, max_questions=4, **QUIET)
  assert figures["llm_answered_fraction"] == 0.0
  assert figures["llm_result"] is False
  assert figures["llm_errors"]["truncated"] >= 8
  out = workdir / "eval" / "dev.openai-stub-model.first4"
  assert (out / "report.md").read_text().startswith("**NOT AN LLM RESULT")
  text = evaluate_run.figures_text(figures, "agents", workdir)
  assert text.startswith("NOT AN LLM RESULT") and "truncated" in text
  assert f"machine: {figures['machine']['cpu_model']}" in text
  assert "\nper_seed " not in text and "\nmachine " not in text  # no dicts
  with pytest.raises(LLMError, match="NOT AN LLM RESULT"):
    evaluate_run.check_required(figures, {"require_llm": True})
  assert (out / "full.seed0.jsonl").read_text().count("\n") == 4


@pytest.mark.xdist_group("llama")
def test_explorer_alone_on_a_real_model(head_run, llama_server, tmp_path):
  """--explorer_only with graph=explorer: SmolLM2 explores the KG through
  the graph functions and answers; GraphDancer's figures come from its
  transcripts (one record per question)."""
  _, workdir = _copy(head_run, tmp_path, "explorer")
  config = evaluate_run.load_run_config(workdir)
  figures = evaluate_run.evaluate_run(
      config, None, workdir,
      {"backend": "openai", "model": MODEL_ALIAS, "base_url": llama_server,
       "explorer_only": True, "max_questions": 3,
       "llm_setting": ["graph=explorer", "max_interactions=3",
                       "max_output_tokens=128", "thinking_budget=0",
                       "max_concurrency=1"]}, progress=False)
  assert figures["questions"] == figures["explorer_questions"] == 3
  for key in ("valid_format_rate", "valid_step_rate", "valid_call_rate",
              "unfinished_at_limit", "explorer_accuracy",
              "explorer_rouge_l"):
    assert 0.0 <= figures[key] <= 1.0, key
  assert 0.0 <= figures["calls_per_question"] <= 3
  assert figures["llm"]["per_agent"]["explorer"]["calls"] >= 3
  out = next((workdir / "eval").glob("*.explorer_only.first3"))
  rows = [json.loads(x) for x in (out / "questions.jsonl").read_text(
      ).splitlines()]
  assert len(rows) == 3 and all(r["explorer"][0]["steps"] >= 1
                                for r in rows)
  with pytest.raises(Exception, match="graph=explorer"):
    evaluate_run.evaluate_run(config, None, workdir,
                              {"explorer_only": True}, progress=False)


def test_a_critic_that_always_fell_back_is_no_llm_result(head_run, tmp_path):
  """Every Answer call answered, every Critic call cut: the final answers
  are all the LLM's, but the critic's seat is the local rule's, so the
  result is not an LLM result and --require_llm fails (issue 51)."""
  config, workdir = _copy(head_run, tmp_path, "critic_cut")

  def reply(req):
    if "verdict" in json.dumps(req.get("response_format", {})):
      return '{"verdict": '   # cut mid-reply: the critic falls back
    return json.dumps({"answer": 0, "confidence": 0.9, "rationale": "r"})
  with StubOpenAI(reply) as stub:
    agents = _agents(config, stub.url, model="stub-model")
    figures = agents_eval.evaluate(config, None, workdir, seeds=1,
                                   agents=agents, max_questions=4, **QUIET)
  assert figures["llm_answered_fraction"] == 1.0
  assert figures["llm_answered_fraction_answer"] == 1.0
  assert figures["llm_answered_fraction_critic"] == 0.0
  assert figures["llm_result"] is False
  assert "0.0% of the critic calls" in figures["llm_headline"]
  with pytest.raises(LLMError, match="NOT AN LLM RESULT"):
    evaluate_run.check_required(figures, {"require_llm": True})
