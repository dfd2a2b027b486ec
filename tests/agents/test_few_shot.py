"""Few-shot prompts for the LLM agents and the dry run: the examples are
training (validation-slice) questions, never the evaluated split or the
question itself, identical on a re-run; the Critic gets accepted-correct and
rejected-wrong examples; the dry run sends nothing and counts exactly the
calls a real run then makes against the stub; the key is written nowhere."""

import json
import re
import shutil

import ml_collections
import pytest

from racer_jax.agents import answer_agent as answer_lib
from racer_jax.agents import critic as critic_lib
from racer_jax.agents import few_shot
from racer_jax.errors import ConfigError
from tests.trained_runs import QUIET
from tests.llm.stub_gemini import StubGemini, prompt_text


def _record(i, gold, proposal, reached=True):
  triple = {"head": f"thing{i}", "relation": "atlocation",
            "tail": f"place{i}", "edge_id": i}
  path = {"triples": [triple], "score": 1.0, "reached": reached,
          "verified": True}
  return {"id": f"q{i}", "question": f"Where is thing {i}?",
          "choices": [f"place{i}", "moon"], "gold": gold,
          "rounds": [{"knowledge": [f"Thing{i} is found at place{i}.", ""],
                      "answer": proposal, "confidence": 0.7,
                      "rationale": "local", "paths": [[path], []],
                      "choice_triples": [[], []]}]}


@pytest.fixture
def bank(tmp_path):
  path = tmp_path / "validation.jsonl"
  rows = [_record(i, 0, 0 if i % 3 else 1, reached=i != 4)
          for i in range(8)]
  rows.append({**_record(9, 0, 0), "gold": None})  # unlabeled: skipped
  path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  return few_shot.examples_from_records(path)


def test_answer_examples_are_fixed_and_never_the_question(bank):
  shots = few_shot.FewShot(bank, 3, "seeded", seed=0)
  assert len(bank) == 8
  picked = shots.answer_examples("Where is thing 2?", "q2")
  assert len(picked) == 3 and all(e.id != "q2" for e in picked)
  # the same stem under another id is the question itself, too
  assert all(e.question != "Where is thing 2?" for e in
             shots.answer_examples("Where is thing 2?", "new"))
  req = answer_lib.AnswerRequest("Where is the cat?", ["mat", "sky"],
                                 ["Cat is found at mat.", ""], qid="d1")
  prompt = answer_lib.answer_prompt(req, shots)
  assert prompt == answer_lib.answer_prompt(req, shots)  # a re-run
  assert prompt.count("Example ") == 3 and prompt.endswith(
      answer_lib.question_text(req.question, req.choices, req.knowledge))
  replies = [json.loads(x) for x in re.findall(r"Reply: (\{.*\})", prompt)]
  assert [r["answer"] for r in replies] == [0, 0, 0]  # the gold answers
  for ex, reply in zip(shots.answer_examples(req.question, "d1"), replies):
    # the rationale cites the fact of the path that reached the gold
    if ex.id != "q4":
      assert f"Thing{ex.id[1:]} is found at place{ex.id[1:]}." in \
          reply["rationale"]
    else:
      assert "no fact shown supports it" in reply["rationale"]
  zero = answer_lib.answer_prompt(req, few_shot.FewShot(bank, 0))
  assert "Example" not in zero


def test_nearest_rule_and_critic_examples(bank):
  class Encoder:  # a bag of the digits: thing i is nearest thing i
    def encode(self, texts):
      import numpy as np
      out = np.zeros((len(texts), 10))
      for n, t in enumerate(texts):
        for d in re.findall(r"\d", t):
          out[n, int(d)] = 1
      return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True),
                              1e-9)
  shots = few_shot.FewShot(bank, 1, "nearest", encoder=Encoder())
  assert [e.id for e in shots.answer_examples("Where is thing 5 now?")] == \
      ["q5"]
  assert [e.id for e in shots.answer_examples("Where is thing 5?",
                                              "q5")] != ["q5"]
  critic = few_shot.FewShot(bank, 4, "seeded", seed=1)
  picked = critic.critic_examples("Where is it?", "d")
  assert [e.proposal == e.gold for e in picked] == [True, False, True, False]
  req = answer_lib.AnswerRequest("Where is it?", ["a", "b"], ["", ""],
                                 qid="d")
  proposal = critic_lib.Proposal(
      req, answer_lib.Answer(0, 0.6, [0.6, 0.4], "r", "", "", "x"), 0.0)
  prompt = critic_lib.critic_prompt(proposal, critic)
  verdicts = [json.loads(x)["verdict"] for x in
              re.findall(r"Reply: (\{.*\})", prompt)]
  assert verdicts == ["ACCEPT", "UNSURE", "ACCEPT", "UNSURE"]
  with pytest.raises(ConfigError, match="only 8 labeled"):
    few_shot.FewShot(bank, 8)
  with pytest.raises(ConfigError, match="few_shot_rule"):
    few_shot.FewShot(bank, 2, "random")


def _accepting_stub(req):
  system = json.dumps(req.get("systemInstruction", {}))
  if "check a proposed answer" in system:
    return json.dumps({"verdict": "ACCEPT", "confidence": 0.9,
                       "reason": "scripted"})
  return json.dumps({"answer": 0, "confidence": 0.8, "rationale": "scripted"})


@pytest.mark.slow  # calibration and four passes of the loop on the demo
def test_dry_run_counts_what_the_real_run_sends(answer_run, demo_workspace,
                                                tmp_path):
  from racer_jax.eval import agents_eval
  config, source = answer_run
  workdir = tmp_path / "run"
  shutil.copytree(source, workdir)
  key = "sk-test-KEY-never-written"
  with StubGemini(_accepting_stub) as stub:
    agents = ml_collections.ConfigDict(config.agents.to_dict())
    agents.update(backend="gemini", base_url=stub.url, max_turns=2,
                  few_shot=3, attempts=1)
    dry = agents_eval.evaluate(config, None, workdir, agents=agents,
                               api_key=key, seeds=1, dry_run=True,
                               max_questions=5, **QUIET)
    assert len(stub.requests) == 0 or all(
        ":generateContent" not in r["path"] for r in stub.requests)
    assert dry["generate_calls_made"] == 0 and dry["questions"] == 5
    assert dry["token_count"] == "count_tokens"  # the SDK reached the stub
    n = dry["questions"]
    # round 1: the no-critic pass's answers, the full pass's answers (the
    # same prompts: repeats) and its critic calls
    assert dry["llm_calls"] == 3 * n and dry["llm_new_calls"] == 2 * n
    assert dry["per_agent"]["critic"]["calls"] == n
    assert dry["later_rounds_calls_upper_bound"] == 2 * n
    # the cap is the reply's room plus the thinking budget
    assert dry["input_tokens"] > 0 and dry["output_tokens_upper_bound"] == \
        2 * n * (agents.max_output_tokens + agents.thinking_budget)
    rows = [json.loads(x) for x in open(dry["prompts_file"])]
    assert len(rows) == 3 * n
    train_stems = {e.stem for e in demo_workspace.splits["train"].examples}
    dev_stems = {e.stem for e in demo_workspace.splits["dev"].examples}
    shown = []
    for row in rows:
      shots, asked = row["user"].split("Now the question to answer:\n")
      examples = re.findall(r"Question: (.*)", shots)
      [question] = re.findall(r"Question: (.*)", asked)
      assert len(examples) == 3 and question not in examples
      assert set(examples) <= train_stems and not set(examples) & dev_stems
      # the TemplateAgent's memory-aware lines, in the examples as well
      assert asked.count("reliability:") or "(no path found)" in asked
      assert "Facts:" not in row["user"]
      shown += [line for line in row["user"].splitlines()
                if line.startswith("   - ") and "(no path found)" not in line]
    # every path shown, in an example or in the question asked, carries its
    # memory line (some walks find no path on the small demo walker)
    assert shown and all("[reliability:" in line for line in shown), shown
    # the real run against the stub: the calls the dry run counted
    stub.requests.clear()
    real = agents_eval.evaluate(config, None, workdir, agents=agents,
                                api_key=key, seeds=1, max_questions=5,
                                **QUIET)
    sent = [r for r in stub.requests if ":generateContent" in r["path"]]
    assert len(sent) == dry["llm_new_calls"]
    assert real["llm"]["llm_calls"] == dry["llm_calls"]
    assert real["llm"]["per_agent"]["critic"]["calls"] == n
    # the answer prompts are exact; the critic's differ only where the
    # LLM's answer replaced the local stand-in
    is_critic = lambda r: "check a proposed answer" in json.dumps(
        r["json"].get("systemInstruction", {}))
    assert sorted(prompt_text(r["json"]) for r in sent if not is_critic(r)) \
        == sorted({r["user"] for r in rows if r["agent"] == "answer"})
    strip = lambda t: t.rsplit("\n\nProposed answer:", 1)[0]
    assert sorted(strip(prompt_text(r["json"])) for r in sent
                  if is_critic(r)) == sorted(
        strip(r["user"]) for r in rows if r["agent"] == "critic")
    # a re-run sends identical prompts: all from the cache
    stub.requests.clear()
    again = agents_eval.evaluate(config, None, workdir, agents=agents,
                                 api_key=key, seeds=1, max_questions=5,
                                 **QUIET)
    assert not [r for r in stub.requests if ":generateContent" in r["path"]]
    assert again["llm"]["llm_new_calls"] == 0
  for path in workdir.rglob("*"):
    if path.is_file():
      assert key.encode() not in path.read_bytes(), path
