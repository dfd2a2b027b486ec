"""HyGRL's jitted greedy beam search against the plain-Python reference
(``bench/hygrl_python.py``) on the demo data and random padded graphs, for
the policy (random params) and the fused heuristic (random θ); one compile
per stage of the update; sampled and greedy search share one code path.

Float caveat: JAX scores in float32, the reference in float64 (P rounded to
float32 before ranking), so two candidates whose P agree to ~1e-6, or a P
that close to tau, could be ordered or kept differently. Exact ties are
fine: both sides break them by lower node index. The demo has some (its
static encoder gives e.g. "dog", "pet" and "horse" one vector, so mirror
candidates fuse to the same S; S clips at 1 - 1e-6), and each side scores
the tied candidates by the same operations on equal inputs, so they tie
bitwise there too (the tie-break is checked). Otherwise, with the seeds
used here, distinct P of passing candidates differ by >= 2.9e-5 and every
P sits >= 8e-4 from tau (measured with the reference), far above float32
noise (~1e-7). The random graphs give every node its own embedding.
"""

import functools

import chex
import jax
import jraph
import numpy as np
import pytest

from configs import test as test_config
from launch.bench import hygrl_python as ref
from racer_jax.data.batch import GraphBatch
from racer_jax.hygrl import beam
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl import state as hygrl_state
from racer_jax.hygrl import update as hygrl_update
from racer_jax.walker.policy import HyGRLPolicy
from racer_jax.runs.workspace import load_workspace


def _program(policy, cfg, sampled: bool = False):
  """jit ``run(params, theta, batch, concept_emb, key)``: per question,
  ``(position, sufficient)`` of the policy's and the heuristic's greedy
  searches and, with ``sampled``, the policy's greedy ``(final, trace)``
  and a sampled one (the key split over questions)."""
  @jax.jit
  def run(params, theta, batch, concept_emb, key):
    x = hygrl.hygrl_inputs(batch, concept_emb, cfg)

    def one(x, k):
      out = []
      for kwargs in (dict(policy=policy, params=params), dict(theta=theta)):
        final, _ = hygrl.search(x, cfg, **kwargs)
        out.append((final.position, beam.sufficient(
            x.adj, final.in_sequence, x.seeds, x.gold,
            cfg.beam.max_nodes + 1)))
      if sampled:
        kwargs = dict(policy=policy, params=params, rng=k)
        out += [hygrl.search(x, cfg, sample=False, **kwargs),
                hygrl.search(x, cfg, sample=True, **kwargs)]
      return out

    return jax.vmap(one)(x, jax.random.split(key, x.usable.shape[0]))
  return run


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
  """config, workspace, HyGRLConfig, policy and one compiled program for
  the whole demo bucket (all tests on the demo share it)."""
  config = test_config.get_config()
  ws = load_workspace(config, None, tmp_path_factory.mktemp("prep"),
                      ["train"], progress=False, log=lambda _: None)
  cfg = hygrl_state.hygrl_config(config)
  policy = hygrl_state.make_hygrl_policy(config)
  return config, ws, cfg, policy, _program(policy, cfg, sampled=True)


def _init_params(policy, cfg, dim, seed):
  return jax.device_get(hygrl.init_hygrl_policy(
      policy, jax.random.PRNGKey(seed), dim, cfg.beam.window,
      cfg.policy_choice))


def _sequence(position):
  """Node ids in sequence order from a BeamState's positions."""
  position = np.asarray(position)
  return np.argsort(np.where(position >= 0, position, 10 ** 6),
                    kind="stable")[:int((position >= 0).sum())].tolist()


def _check_against_reference(run, policy, cfg, batch, concept_emb, seeds):
  """Asserts equal sequences and sufficiency for every question, for the
  policy with random params and the heuristic with a random θ per seed
  (``run`` from :func:`_program`); returns the appended lengths."""
  rows = np.flatnonzero(batch.example_mask)
  questions = [ref.question_from_batch(batch, row, concept_emb)
               for row in rows]
  preps = [ref.prepare(q, cfg.restart_prob, cfg.ppr_iters)
           for q in questions]
  lengths = []
  for seed in seeds:
    params = _init_params(policy, cfg, concept_emb.shape[1], seed)
    theta = np.random.default_rng(seed).normal(
        size=len(hygrl.fusion_metrics(cfg))).astype(np.float32)
    out = jax.device_get(run(params, theta, batch, concept_emb,
                             jax.random.PRNGKey(0)))
    for row, q, prep in zip(rows, questions, preps):
      for k, kwargs in enumerate((dict(params=params), dict(theta=theta))):
        seq, ok = ref.greedy_search(q, cfg, prep=prep, **kwargs)
        position, sufficient = out[k]
        assert _sequence(position[row]) == seq, (seed, row, list(kwargs))
        assert bool(sufficient[row]) == ok, (seed, row, list(kwargs))
        lengths.append(len(seq) - int(q.seeds.sum()))
  return lengths


def _demo_batch(ws):
  """The demo's first bucket, all its questions (one batch shape)."""
  data = ws.splits["train"].dataset
  assert list(data.members) == [0]  # test config: one bucket in use
  return data.batch(0, np.arange(data.num_questions), data.num_questions)


def test_demo_greedy_search_matches_reference(demo):
  _, ws, cfg, policy, run = demo
  lengths = _check_against_reference(run, policy, cfg, _demo_batch(ws),
                                     ws.concept_emb, seeds=(3, 4))
  assert len(lengths) == 2 * 2 * ws.splits["train"].dataset.num_questions
  assert 0 < np.mean(lengths) < cfg.beam.max_nodes  # searches do something


def _random_batch(seed, b=8, n=20, e=48, c=3, d=8):
  """Random padded question graphs: parallel edges, self-loops, masked
  garbage edges, padding nodes, questions without seeds or gold."""
  rng = np.random.default_rng(seed)
  n_real = rng.integers(3, n, b)
  node_mask = np.arange(n)[None] < n_real[:, None]
  senders = np.repeat(n_real[:, None], e, 1).astype(np.int32)
  receivers = senders.copy()
  edge_mask = np.zeros((b, e), bool)
  is_question = np.zeros((b, n), bool)
  choice_mask = rng.random((b, n, c)) < 0.15
  for i, m in enumerate(n_real):
    k = int(rng.integers(m // 2, e - 2))
    senders[i, :k], receivers[i, :k] = rng.integers(0, m, (2, k))
    senders[i, k], receivers[i, k] = rng.integers(0, m, 2)  # masked garbage
    edge_mask[i, :k] = True
    seeds = int(rng.integers(1, 4)) if i < b - 1 else 0  # last: no seeds
    is_question[i, rng.choice(m, seeds, replace=False)] = True
  choice_mask &= node_mask[..., None]
  emb = rng.normal(size=(b * n, d)).astype(np.float32)
  emb /= np.linalg.norm(emb, axis=1, keepdims=True)
  graphs = jraph.GraphsTuple(
      nodes={"concept": np.where(node_mask, np.arange(b * n).reshape(b, n),
                                 -1).astype(np.int32),
             "is_question": is_question},
      edges={}, senders=senders, receivers=receivers,
      n_node=np.stack([n_real, n - n_real], 1).astype(np.int32),
      n_edge=np.zeros((b, 2), np.int32), globals=None)
  batch = GraphBatch(
      graphs=graphs, node_mask=node_mask, edge_mask=edge_mask,
      choice_mask=choice_mask, choice_valid=rng.random((b, c)) < 0.9,
      neighbors=np.zeros((b, n, 1), np.int32),
      neighbor_mask=np.zeros((b, n, 1), bool),
      gold=rng.integers(-1, c, b).astype(np.int32),
      example_mask=np.ones(b, bool), example_index=np.arange(b, dtype=np.int32),
      query=rng.normal(size=(b, d)).astype(np.float32))
  return batch, emb


@pytest.mark.parametrize("policy_choice,heuristic_choice",
                         [(True, False), (False, True)])
def test_random_graph_greedy_search_matches_reference(policy_choice,
                                                      heuristic_choice):
  cfg = hygrl.HyGRLConfig(
      beam=beam.BeamConfig(beam_width=3, tau=0.45, max_depth=4,
                           max_nodes=7, window=2),
      heuristic_tau=0.35, ppr_iters=60, restart_prob=0.2,
      policy_choice=policy_choice, heuristic_choice=heuristic_choice)
  policy = HyGRLPolicy(hidden_sizes=(32, 16))
  batch, emb = _random_batch(0, b=16)
  lengths = _check_against_reference(_program(policy, cfg), policy, cfg,
                                     batch, emb, seeds=(1, 4, 6))
  assert max(lengths) == cfg.beam.max_nodes  # the cap binds somewhere


def test_update_compiles_once_per_stage(demo):
  config, ws, cfg, _, _ = demo
  data = ws.splits["train"].dataset
  theta = np.zeros(len(hygrl.fusion_metrics(cfg)), np.float32)
  policy, optimizer, state = hygrl_state.create_state(
      config, ws.concept_emb.shape[1])
  bucket, members = next(iter(data.members.items()))
  for stage in ("imitation", "rl"):
    chex.clear_trace_counter()
    step = hygrl_update.make_hygrl_step(
        policy, optimizer, cfg, stage, donate=False,
        wrap=functools.partial(chex.assert_max_traces, n=1))
    for start in range(0, min(len(members), 12), 4):
      state, metrics = step(state, data.batch(bucket, np.arange(
          start, start + 4), 4), ws.concept_emb, theta)
      metrics = jax.device_get(metrics)
      assert float(metrics["finite"]) == 1.0, (stage, metrics)
      assert all(np.isfinite(v) for v in metrics.values()), (stage, metrics)
  assert int(state.step) == 6


def test_sampled_and_greedy_share_the_code_path(demo):
  _, ws, cfg, policy, run = demo
  batch = _demo_batch(ws)
  params = _init_params(policy, cfg, ws.concept_emb.shape[1], 5)
  args = (params, np.zeros(len(hygrl.fusion_metrics(cfg)), np.float32), batch,
          ws.concept_emb)
  out = jax.device_get(run(*args, jax.random.PRNGKey(0)))
  (position, _), _, (greedy, g_trace), _ = out
  np.testing.assert_array_equal(greedy.position, position)
  questions = [ref.question_from_batch(batch, row, ws.concept_emb)
               for row in range(batch.batch_size)]
  preps = [ref.prepare(q, cfg.restart_prob, cfg.ppr_iters)
           for q in questions]
  p64 = ref.float64_params(params)
  seen = set()
  tau = np.float32(cfg.beam.tau)
  for s in range(3):
    _, _, (g, _), (final, trace) = jax.device_get(run(
        *args, jax.random.PRNGKey(s)))
    chex.assert_trees_all_equal(g, greedy)  # greedy ignores the key
    seen.add(final.position.tobytes())
    # Step 0 sees the same state as the greedy search, so the same scores.
    np.testing.assert_array_equal(trace.prob[:, 0], g_trace.prob[:, 0])
    for row, (q, prep) in enumerate(zip(questions, preps)):
      for d in np.flatnonzero(trace.active[row]):
        chosen = trace.chosen[row, d][trace.chosen[row, d] >= 0]
        assert trace.frontier[row, d, chosen].all()
        assert (trace.prob[row, d, chosen] >= tau).all()
        # Every sampled state is scored by the greedy search's scorer.
        seq = np.flatnonzero(trace.in_sequence[row, d]).tolist()
        front = np.flatnonzero(trace.frontier[row, d]).tolist()
        if front:
          metrics = ref.candidate_metrics(q, prep, seq, front)
          want, _ = ref.policy_scores(p64, q, trace.window[row, d], front,
                                      metrics, cfg.policy_choice)
          np.testing.assert_allclose(trace.prob[row, d, front], want,
                                     rtol=1e-5, atol=1e-6)
  assert len(seen) > 1  # different keys sample different sequences


def test_reference_rejects_ambiguous_scorer(demo):
  _, ws, cfg, _, _ = demo
  batch = ws.splits["train"].dataset.batch(0, np.arange(1), 1)
  q = ref.question_from_batch(batch, 0, ws.concept_emb)
  with pytest.raises(ValueError):
    ref.greedy_search(q, cfg)
