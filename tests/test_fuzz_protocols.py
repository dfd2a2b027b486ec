"""Property tests over the parsers that read what an LLM or a user typed:
the graph-tool protocol, the graph functions' arguments, LLM JSON replies
and config overrides. Every input ends in a result or one of the
documented error types — never another exception or a hang."""

import json
import math
import os

import pytest
from absl import flags
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ml_collections import config_flags

from racer_jax.agents import answer_agent as answer_lib
from racer_jax.agents import critic as critic_lib
from racer_jax.errors import ConfigError
from racer_jax.graphdancer.tools import (
  FUNCTIONS,
  GraphTools,
  ProtocolError,
  ToolError,
  parse_step,
)
from racer_jax.llm import llm, llm_usage
from racer_jax.runs.config_checks import check_config
from tests.conftest import REPO

EXAMPLES = 300
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

_tags = st.sampled_from([
    "<think>", "</think>", "<graph>", "</graph>", "<answer>", "</answer>",
    "RetrieveNode", "NodeFeature", "NodeDegree", "NeighbourCheck", "[", "]",
    ",", " ", "\n", "dog", "IsA", "degree", "ice cream", "<", ">", "/",
    "\u00e9", "\x00", "'", '"'])
_protocol_text = st.lists(st.one_of(_tags, st.text(max_size=6)),
                          max_size=30).map("".join)


@SETTINGS
@given(text=st.one_of(_protocol_text, st.none()))
def test_protocol_parser_returns_a_step_or_protocol_error(text):
  try:
    step = parse_step(text)
  except ProtocolError:
    return
  assert step.answer is not None or step.function in FUNCTIONS


@pytest.fixture(scope="module")
def demo_tools():
  import tempfile

  from configs import test as test_config
  from racer_jax.runs.workspace import load_workspace, make_encoder
  config = test_config.get_config()
  ws = load_workspace(config, None, tempfile.mkdtemp(), [], progress=False,
                      log=lambda _: None)
  return GraphTools(ws.kg, make_encoder(config), ws.concept_emb)


@SETTINGS
@given(function=st.one_of(st.sampled_from(FUNCTIONS), st.text(max_size=8)),
       args=st.lists(st.one_of(
           st.sampled_from(["dog", "cat", "IsA", "AtLocation", "degree",
                            "name", "relations", "", "ice_cream"]),
           st.text(max_size=10)), max_size=3))
def test_graph_functions_return_or_raise_tool_error(demo_tools, function,
                                                    args):
  try:
    observation, evidence = demo_tools.call(function, args)
  except ToolError:
    return
  assert isinstance(observation, str)
  for t in evidence:  # evidence is always a real KG triple
    assert t.edge_id >= 0


_json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 9) |
    st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["answer", "confidence", "rationale", "verdict",
                         "reason", "x"]), inner, max_size=4),
    max_leaves=10)
_reply_text = st.one_of(_json_like.map(json.dumps), st.text(max_size=30),
                        _json_like.map(lambda v: json.dumps(v)[:-1]))


@SETTINGS
@given(text=_reply_text)
def test_llm_json_replies_parse_or_name_the_error(text):
  for schema in (answer_lib.answer_schema(5), critic_lib.CRITIC_SCHEMA):
    parsed, error = llm.parse_reply(text, schema)
    if error is None:
      assert isinstance(parsed, dict) and set(schema["required"]) <= set(
          parsed)
    else:
      assert parsed is None and error in ("malformed_json",
                                          "schema_violation")


class _ScriptedBackend:
  """Replies with the fuzzed texts (as a real backend would hand them)."""
  name = "scripted"

  def __init__(self, texts):
    self.texts = texts

  def generate_many(self, requests):
    out = []
    for i, r in enumerate(requests):
      text = self.texts[i % len(self.texts)]
      parsed, error = llm.parse_reply(text, r.schema)
      out.append(llm.LLMReply(text, parsed, 3, 2, backend=self.name,
                              error=error))
    return out


class _FallbackAnswerer:
  name = "local"

  def answer_many(self, requests):
    return [answer_lib.Answer(0, 1.0, [1.0] + [0.0] * (len(r.choices) - 1),
                              "fallback", "", "", self.name)
            for r in requests]


@SETTINGS
@given(texts=st.lists(_reply_text, min_size=1, max_size=4),
       num_choices=st.integers(2, 5))
def test_llm_answerer_always_ends_in_a_valid_choice(texts, num_choices):
  report = llm_usage.UsageReport()
  answerer = answer_lib.LLMAnswerer(_ScriptedBackend(texts),
                                    _FallbackAnswerer(), report)
  request = answer_lib.AnswerRequest("q?", [f"c{i}" for i in
                                            range(num_choices)],
                                     [""] * num_choices)
  answers = answerer.answer_many([request] * 3)
  assert len(answers) == 3
  for a in answers:
    assert 0 <= a.choice < num_choices
    assert a.llm is not None and a.llm["calls"] == 1
  assert report.calls == 3


_KEYS = ["batch.batch_size", "train.num_steps", "train.learning_rate",
         "train.p_teacher", "walker.top_k", "walker.max_steps",
         "eval.seeds", "curriculum.start", "train.stage", "agents.backend",
         "answer.epochs", "memory.prior", "curriculum.weights",
         "train.num_devices", "walker.recurrent", "refiner.top_k"]
_VALUES = st.one_of(
    st.integers(-5, 5).map(str), st.floats(allow_nan=True,
                                           allow_infinity=True).map(str),
    st.sampled_from(["nan", "inf", "-1", "0", "1e9", "true", "walker",
                     "gemini", "lstm", "(1, 2, 3)", "(0, 0, 0)", "[]", "",
                     "None", "1.5", "abc"]),
    st.text(max_size=6))


@settings(max_examples=EXAMPLES, deadline=None)
@given(key=st.sampled_from(_KEYS), value=_VALUES)
def test_config_overrides_apply_or_fail_cleanly(key, value):
  fv = flags.FlagValues()
  config_flags.DEFINE_config_file("config", os.fspath(REPO / "configs" /
                                                      "test.py"),
                                  flag_values=fv)
  try:
    fv(["prog", f"--config.{key}={value}"])
    config = fv.config
  except (flags.Error, ValueError, TypeError):
    return  # absl/ml_collections reject an override of the wrong type
  try:
    check_config(config)
  except ConfigError as e:
    assert key.split(".")[0] in str(e) or "batch" in str(e)
    return
  v = config
  for part in key.split("."):
    v = v[part]
  if isinstance(v, float):
    assert math.isfinite(v)
