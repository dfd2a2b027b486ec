"""The trained explorer's machinery on a tiny random Llama (a GGUF written
here) and the demo graph: episodes encoded with the loss mask, tunix's SFT
reading that mask (parity with a hand-computed masked cross-entropy), an
exact resume, and batched rollouts whose tokens are the ones sampled."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("tunix", reason="the LM extra: pip install -e '.[lm]'")
pytest.importorskip("gguf", reason="the LM extra: pip install -e '.[lm]'")

from racer_jax.graphdancer import inputs, sft, trajectories  # noqa: E402
from racer_jax.graphdancer.rollout import Rollout, cut_step  # noqa: E402
from racer_jax.graphdancer.rollout import environment  # noqa: E402
from racer_jax.graphdancer.tools import GraphTools  # noqa: E402
from racer_jax.lm import causal_lm  # noqa: E402
from racer_jax.runs.workspace import load_workspace  # noqa: E402
from tests.lm import tiny_gguf  # noqa: E402
from tests.trained_runs import QUIET  # noqa: E402

pytestmark = pytest.mark.slow   # tunix's trainer and sampler compile: ~1 min


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
  from configs import graphdancer_demo
  config = graphdancer_demo.get_config()
  config.graphdancer.max_observation_tokens = 24
  path = tmp_path_factory.mktemp("lm") / "tiny.gguf"
  tiny_gguf.write_tiny_llama(path)
  lm = causal_lm.load_causal_lm(str(path))
  ws = load_workspace(config, None, tmp_path_factory.mktemp("prep"),
                      ["train"], **QUIET)
  env, system = environment(config, GraphTools(ws.kg), lm.tokenizer)
  rows, episodes = [], []
  split = ws.splits["train"]
  for example, subgraph in list(zip(split.examples, split.subgraphs))[:8]:
    episode, _ = trajectories.conceptnet_trajectory(env, example, subgraph)
    prompt = inputs.prompt_ids(lm.tokenizer, system, example.stem,
                               example.choices)
    rows.append(inputs.encode_episode(lm.tokenizer, prompt, episode))
    episodes.append((episode, len(prompt)))
  return config, lm, ws, env, system, rows, episodes


def test_the_loss_mask_covers_the_models_tokens_only(setting):
  _, lm, _, _, _, rows, episodes = setting
  tok = lm.tokenizer
  for (ids, mask), (episode, prompt_length) in zip(rows, episodes):
    assert len(ids) == len(mask) and not any(mask[:prompt_length])
    assert ids[-1] == tok.eos_id and mask[-1] == 1
    at = prompt_length
    for segment in episode.segments:
      n = len(tok.encode(segment.text))
      assert set(mask[at:at + n]) == {int(segment.by_model)}
      assert tok.decode(ids[at:at + n]) == segment.text
      at += n
    assert at == len(ids) - 1


def _masked_nll(lm, params_state, batch):
  """The reference: mean next-token NLL over targets whose mask is 1,
  attention and positions from the padding."""
  tokens = jnp.asarray(batch["tokens"])
  real = tokens != lm.tokenizer.pad_id
  positions = jnp.maximum(jnp.cumsum(real, -1) - 1, 0)
  attend = jnp.tril(jnp.ones((tokens.shape[1],) * 2, bool))[None] & \
      real[:, None, :]
  logits, _ = causal_lm.forward(lm.graphdef, params_state, tokens, positions,
                                None, attend)
  logp = causal_lm.token_logprobs(logits[:, :-1], tokens[:, 1:])
  m = jnp.asarray(batch["loss_mask"][:, 1:], jnp.float32)
  return float(-(logp * m).sum() / m.sum())


def test_sft_reads_the_mask_and_resumes_exactly(setting, tmp_path):
  _, lm, _, _, _, rows, _ = setting
  kw = dict(batch_size=2, learning_rate=3e-3, weight_decay=0.0,
            warmup_steps=0, seed=0, checkpoint_every=2, log=lambda _: None)
  straight, losses = sft.train(lm, rows, steps=4,
                               checkpoint_dir=tmp_path / "a", **kw)
  first = next(sft.batches(rows, 2, lm.tokenizer.pad_id, 0))
  # tunix's first loss is the masked cross-entropy of the first batch
  assert losses[0] == pytest.approx(_masked_nll(lm, lm.state, first),
                                    rel=1e-4)
  # the mask left targets out: the observations and the prompt as targets
  # too would give another loss
  every = dict(first, loss_mask=(first["tokens"] != lm.tokenizer.pad_id
                                 ).astype(np.int32))
  assert _masked_nll(lm, lm.state, every) != pytest.approx(losses[0],
                                                          rel=1e-3)
  # learning: the same batch's loss falls
  assert _masked_nll(straight, straight.state, first) < losses[0]
  # stopped after 2 updates, then resumed to 4: the same parameters
  sft.train(lm, rows, steps=2, checkpoint_dir=tmp_path / "b", **kw)
  resumed, again = sft.train(lm, rows, steps=4,
                             checkpoint_dir=tmp_path / "b", **kw)
  assert len(again) == 2
  jax.tree.map(np.testing.assert_array_equal,
               straight.state.to_pure_dict(), resumed.state.to_pure_dict())
  restored, step = sft.restore(lm, tmp_path / "b")
  assert step == 4
  jax.tree.map(np.testing.assert_array_equal,
               straight.state.to_pure_dict(), restored.state.to_pure_dict())


def test_rollouts_keep_the_sampled_tokens(setting):
  config, lm, ws, env, system, _, _ = setting
  split = ws.splits["train"]
  questions = [(e.stem, list(e.choices), [e.choices[e.answer_index]])
               for e in split.examples[:3]]
  env.max_turns = 2
  runs = Rollout(lm, env, system, max_step_tokens=12,
                 max_context_tokens=4096).run(questions, seed=0)
  tok = lm.tokenizer
  for r, (q, c, _) in zip(runs, questions):
    assert r.ids[:r.prompt_length] == inputs.prompt_ids(tok, system, q, c)
    assert r.episode.done and r.episode.turns <= 2
    model_text = [s.text for s in r.episode.segments if s.by_model]
    runs_of_ones, at = [], r.prompt_length
    while at < len(r.ids):
      end = at
      while end < len(r.ids) and r.mask[end] == r.mask[at]:
        end += 1
      if r.mask[at]:
        runs_of_ones.append(tok.decode(r.ids[at:end]))
      at = end
    assert runs_of_ones == model_text
  # a random model writes no protocol: every step is an error observation
  assert all(r.episode.valid_steps == 0 for r in runs)
  # greedy sampling is deterministic
  again = Rollout(lm, env, system, max_step_tokens=12,
                  max_context_tokens=4096).run(questions, seed=0)
  assert [r.ids for r in again] == [r.ids for r in runs]


def test_cut_step_stops_after_the_first_step_end(setting):
  _, lm, _, _, _, _, _ = setting
  tok = lm.tokenizer
  ids = tok.encode("<think>a</think><graph>RetrieveNode[b]</graph> more "
                   "<answer>c</answer>")
  cut = cut_step(tok, ids)
  assert tok.decode(cut).endswith("</graph>")
  assert cut_step(tok, tok.encode("no end")) == tok.encode("no end")
