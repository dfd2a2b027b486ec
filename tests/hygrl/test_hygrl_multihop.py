"""HyGRL in its multi-hop setting: features, recall, optimizer, a run."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import hygrl_2wiki
from racer_jax.hygrl import multihop_eval
from racer_jax.hygrl import pairs as hygrl_pairs
from racer_jax.hygrl import search as hygrl
from racer_jax.hygrl import state as hygrl_state
from racer_jax.hygrl import update as hygrl_update
from racer_jax.train import evaluate_run, run_stage
from tests.hygrl import tiny
from tests.real_llm import MODEL_ALIAS


def test_recall_at_k_by_hand():
  gold = ((3,), (7, 8), (9,))          # three gold groups
  ranked = [5, 8, 1, 3, 4, 9]
  assert multihop_eval.recall_at(ranked, gold, 2) == 1 / 3   # 8 (group 2)
  assert multihop_eval.recall_at(ranked, gold, 5) == 2 / 3   # + 3
  assert multihop_eval.recall_at(ranked, gold, 6) == 1.0     # + 9


def test_beam_ranking_sequence_then_rest():
  nodes = np.array([20, 2, 25, 0, 1, 3, -1])   # < 10 are passages
  position = np.array([0, 2, 1, -1, 3, -1, -1])
  rest = np.array([-np.inf, -np.inf, -np.inf, 0.5, -np.inf, 2.0, -np.inf])
  assert multihop_eval.beam_ranking(nodes, position, rest, 10, 5) == [
      2, 1, 3, 0]
  assert multihop_eval.beam_ranking(nodes, position, rest, 10, 1) == [2]


def _unit(x):
  return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_score_features_match_a_plain_loop():
  rng = np.random.default_rng(0)
  n, d, size = 9, 6, 4
  emb = _unit(rng.normal(size=(n, d))).astype(np.float32)
  query = _unit(rng.normal(size=d)).astype(np.float32)
  in_seq = np.zeros(n, bool)
  in_seq[[1, 4]] = True
  window = np.array([4, 1, -1, -1], np.int32)   # |N_s| = 2 < L = 4
  x = hygrl.HyGRLInputs(
      adj=jnp.zeros((n, n), bool), node_mask=jnp.ones(n, bool),
      seeds=jnp.zeros(n, bool), gold=jnp.zeros(n, bool),
      choice=jnp.zeros(n, bool), node_emb=jnp.asarray(emb),
      query=jnp.asarray(query), ppr=jnp.zeros(n),
      adamic_adar=jnp.zeros((n, n)), jaccard=jnp.zeros((n, n)),
      gold_distance=jnp.zeros(n, jnp.int32), usable=jnp.bool_(True))
  state, action = jax.device_get(hygrl.score_features(x, window, in_seq))
  assert state.shape == (size, 1) and action.shape == (n, size + 1)
  context = query + emb[in_seq].mean(0)
  context /= np.linalg.norm(context)
  for i in range(size):
    w = window[i]
    want = float(query @ emb[w]) if w >= 0 else 0.0
    np.testing.assert_allclose(state[i, 0], want, atol=1e-5)
  for a in range(n):
    for i in range(size):
      w = window[i]
      want = float(emb[w] @ emb[a]) if w >= 0 else 0.0
      np.testing.assert_allclose(action[a, i], want, atol=1e-5)
    np.testing.assert_allclose(action[a, size], float(emb[a] @ context),
                               atol=1e-5)
  # the policy reads the 2L + 1 numbers
  assert hygrl.feature_widths(d, size, False, "scores") == (1, size + 1)


def test_score_features_read_the_cross_encoder_relevance():
  """With m_ce given, the question entries are its scores; node-to-node
  entries stay the cosines."""
  rng = np.random.default_rng(1)
  n, d = 7, 5
  emb = _unit(rng.normal(size=(n, d))).astype(np.float32)
  relevance = rng.uniform(size=n).astype(np.float32)
  window = np.array([3, 0, -1], np.int32)
  in_seq = np.zeros(n, bool)
  in_seq[[0, 3]] = True
  x = hygrl.HyGRLInputs(
      adj=jnp.zeros((n, n), bool), node_mask=jnp.ones(n, bool),
      seeds=jnp.zeros(n, bool), gold=jnp.zeros(n, bool),
      choice=jnp.zeros(n, bool), node_emb=jnp.asarray(emb),
      query=jnp.asarray(emb[0]), ppr=jnp.zeros(n),
      adamic_adar=jnp.zeros((n, n)), jaccard=jnp.zeros((n, n)),
      gold_distance=jnp.zeros(n, jnp.int32), usable=jnp.bool_(True),
      relevance=jnp.asarray(relevance))
  state, action = jax.device_get(hygrl.score_features(x, window, in_seq))
  np.testing.assert_allclose(state[:, 0], [relevance[3], relevance[0], 0.0])
  np.testing.assert_allclose(action[:, 3], relevance)
  np.testing.assert_allclose(action[:, 0], emb @ emb[3], atol=1e-5)
  np.testing.assert_allclose(action[:, 2], 0.0)


def test_the_heuristic_reads_m_ce_when_the_cross_encoder_gives_it():
  """Issue 51: HyGRL-Heuristic's semantic metric was the bi-encoder cosine
  even with multihop.relevance=cross_encoder; it is the paper's m_ce."""
  import dataclasses

  from racer_jax.hygrl import heuristics
  from racer_jax.hygrl import passages as hygrl_passages
  rng = np.random.default_rng(2)
  b, n, e, d = 1, 6, 8, 4
  nodes = np.array([[0, 1, 2, 3, 4, -1]], np.int32)
  batch = {"nodes": nodes, "seeds": np.array([[1, 0, 0, 0, 0, 0]], bool),
           "senders": rng.integers(0, 5, (b, e)).astype(np.int32),
           "receivers": rng.integers(0, 5, (b, e)).astype(np.int32),
           "edge_mask": np.ones((b, e), bool),
           "gold": np.array([[0, 0, 1, 0, 0, 0]], bool),
           "query": _unit(rng.normal(size=(b, d))).astype(np.float32),
           "example_mask": np.ones(b, bool),
           "relevance": rng.uniform(size=(b, n)).astype(np.float32)}
  vecs = jnp.asarray(_unit(rng.normal(size=(5, d))), jnp.float32)
  cfg = hygrl.HyGRLConfig(ppr_iters=5)
  one = lambda x: jax.tree.map(lambda a: a[0], x)
  for mode in ("auto", "relevance", "cosine"):
    x = one(hygrl_passages.passage_inputs(
        batch, vecs, dataclasses.replace(cfg, heuristic_semantic=mode)))
    in_seq, front = x.seeds, x.node_mask & ~x.seeds
    semantic = np.asarray(hygrl.candidate_metrics(x, in_seq, front)[:, 3])
    if mode == "cosine":
      context = heuristics.sequence_context(x.query, x.node_emb, in_seq)
      want = heuristics.semantic_scores(x.node_emb, context)
    else:
      want = np.where(nodes[0] >= 0, batch["relevance"][0], 0.0)
    np.testing.assert_allclose(semantic, np.asarray(
        heuristics.normalize_per_question(jnp.asarray(want), front)),
        atol=1e-6)
  without = {k: v for k, v in batch.items() if k != "relevance"}
  with pytest.raises(ValueError, match="multihop.relevance=cross_encoder"):
    hygrl_passages.passage_inputs(
        without, vecs, dataclasses.replace(cfg, heuristic_semantic="relevance"))
  x = one(hygrl_passages.passage_inputs(
      without, vecs, dataclasses.replace(cfg, heuristic_semantic="auto")))
  assert x.semantic is None   # auto without m_ce: the cosine


def test_pair_metrics_anchored_at_v_cur():
  """hygrl.pair_anchor='current': Adamic-Adar and Jaccard of a candidate
  against v_cur (the node added last), as the paper writes; 'sequence'
  keeps the best link from any sequence node."""
  import dataclasses

  from racer_jax.hygrl import heuristics
  from racer_jax.hygrl import beam
  from racer_jax.hygrl import passages as hygrl_passages
  rng = np.random.default_rng(4)
  b, n, e, d = 1, 8, 14, 4
  batch = {"nodes": np.arange(n, dtype=np.int32)[None],
           "seeds": np.array([[1, 0, 1, 0, 0, 0, 0, 0]], bool),
           "senders": rng.integers(0, n, (b, e)).astype(np.int32),
           "receivers": rng.integers(0, n, (b, e)).astype(np.int32),
           "edge_mask": np.ones((b, e), bool),
           "gold": np.array([[0, 0, 0, 0, 0, 1, 0, 0]], bool),
           "query": _unit(rng.normal(size=(b, d))).astype(np.float32),
           "example_mask": np.ones(b, bool)}
  vecs = jnp.asarray(_unit(rng.normal(size=(n, d))), jnp.float32)
  cfg = hygrl.HyGRLConfig(ppr_iters=5)
  x = jax.tree.map(lambda a: a[0], hygrl_passages.passage_inputs(
      batch, vecs, cfg))
  in_seq, front = x.seeds, beam.frontier_of(x.adj, x.seeds, x.node_mask)
  current = hygrl.anchor_of(dataclasses.replace(cfg, pair_anchor="current"),
                            jnp.array([2, 0, -1, -1]))
  assert int(current) == 2
  anchored = hygrl.candidate_metrics(x, in_seq, front, current=current)
  best = hygrl.candidate_metrics(x, in_seq, front)
  for col, table in ((1, x.adamic_adar), (2, x.jaccard)):
    np.testing.assert_allclose(anchored[:, col], heuristics.normalize_per_question(
        table[2].astype(jnp.float32), front), atol=1e-6)
    np.testing.assert_allclose(best[:, col], heuristics.normalize_per_question(
        heuristics.expanded_from_scores(table, x.adj, in_seq), front),
        atol=1e-6)
  np.testing.assert_array_equal(anchored[:, [0, 3]], best[:, [0, 3]])
  assert hygrl.anchor_of(cfg, jnp.array([2, 0])) is None
  # the calibration's first step anchors at the seed added last
  labels = []
  for anchor in ("sequence", "current"):
    c = dataclasses.replace(cfg, pair_anchor=anchor)
    xb = hygrl_passages.passage_inputs(batch, vecs, c)
    m, lab, mask = hygrl.calibration_of(
        xb, batch["senders"], batch["receivers"], batch["edge_mask"], c)
    labels.append(np.asarray(m[0][:, 1]))
  start = beam.window_nodes(beam.initial_state(x.seeds, x.node_mask), 4)
  assert int(start[0]) == 2
  np.testing.assert_allclose(labels[1], heuristics.normalize_per_question(
      x.adamic_adar[2].astype(jnp.float32), front), atol=1e-6)
  # the heuristic's search runs anchored too, and its first step scores
  # the frontier as the anchored metrics say
  c = dataclasses.replace(cfg, pair_anchor="current")
  theta = jnp.zeros(len(hygrl.fusion_metrics(c)))
  final, trace = jax.jit(lambda x: hygrl.search(x, c, theta=theta))(x)
  want = hygrl.heuristic_prob(theta, x, in_seq, front, current=current)
  np.testing.assert_allclose(trace.prob[0], jnp.where(front, want, 0.0),
                             rtol=1e-5)


def _plateau_optimizer(boundary):
  imitation = optax.chain(
      optax.adamw(1e-3),
      optax.contrib.reduce_on_plateau(factor=0.5, patience=2,
                                      accumulation_size=2))
  return hygrl_update.stage_optimizer(imitation, optax.adam(5e-4), boundary)


def _run(tx, losses):
  params = {"w": jnp.ones(3)}
  state = tx.init(params)
  scales, updates = [], []
  for loss in losses:
    u, state = tx.update({"w": jnp.ones(3)}, state, params,
                         value=jnp.float32(loss))
    scales.append(float(hygrl_update.plateau_lr_scale(state)))
    updates.append(float(u["w"][0]))
  return scales, updates


@pytest.mark.parametrize("chunk", [0, 1, 3, 5, 11, 64])
def test_chunked_logits_equal_the_whole_call(chunk):
  """The cross-encoder over a state's pairs a chunk at a time (a loop of
  vmapped calls, the remainder last) gives each pair's own logit."""
  rng = np.random.default_rng(0)
  ids = rng.integers(1, 50, (11, 6)).astype(np.int32)
  types = rng.integers(0, 2, (11, 6)).astype(np.int32)
  mask = rng.random((11, 6)) < 0.8
  def logits(i, t, m):  # a per-row function of the pair, like the model
    return jnp.sum(jnp.where(m, jnp.sin(i * 0.3) + t, 0.0), axis=-1)
  want = logits(ids, types, mask)
  got = jax.jit(hygrl_pairs.chunked_logits, static_argnums=(0, 2))(
      logits, (ids, types, mask), chunk)
  np.testing.assert_allclose(got, want, rtol=1e-6)


def test_plateau_schedule_lowers_the_learning_rate_when_the_loss_stalls():
  stalled, _ = _run(_plateau_optimizer(100), [1.0] * 12)
  falling, _ = _run(_plateau_optimizer(100),
                    [1.0 / (i + 1) for i in range(12)])
  assert stalled[-1] < 1.0 and stalled == sorted(stalled, reverse=True)
  assert falling[-1] == 1.0


def test_stage_optimizer_switches_to_adam_for_rl():
  _, updates = _run(_plateau_optimizer(3), [1.0] * 5)
  # AdamW's first steps move by ~lr (1e-3, with weight decay), Adam's RL
  # steps by ~5e-4
  np.testing.assert_allclose(updates[3:], [-5e-4, -5e-4], rtol=1e-3)
  assert abs(updates[0]) > 9e-4


def _tiny_config(steps: int = 2):
  """The 2Wiki config at the tiny set's size: static vectors, 16 nodes,
  ``steps`` imitation and ``steps`` RL updates of 4 questions."""
  config = hygrl_2wiki.get_config()
  config.text.encoder = "static"
  config.multihop.max_nodes = 16
  config.multihop.max_edges = 64
  config.multihop.latency_questions = 2
  config.multihop.policy_tau_grid = (0.1, 0.5)  # each τ compiles anew
  config.hygrl.imitation_steps = steps
  config.hygrl.rl_steps = steps
  config.batch.batch_size = 4
  config.eval.batch_size = 4
  config.train.log_every = 1
  # the tiny set is too small for a dev part: score all three questions
  config.eval.split = "all"
  return config


def _tiny_run(tmp_path):
  """A trained tiny run: ``(data_dir, config, workdir)``."""
  data = tiny.write(tmp_path / "data")
  config = _tiny_config()
  workdir = tmp_path / "run"
  run_stage.train(config, str(data), workdir, progress=False)
  return data, config, workdir


@pytest.mark.slow  # ~50 s: keeps the default run under 10 minutes
def test_train_and_evaluate_a_tiny_run(tmp_path):
  data, _, workdir = _tiny_run(tmp_path)
  figures = evaluate_run.evaluate_run(
      evaluate_run.load_run_config(workdir), str(data), workdir, {},
      progress=False)
  for key in ("recall_at_2", "recall_at_5", "heuristic_recall_at_5",
              "bm25_recall_at_5", "dense_recall_at_5", "questions",
              "questions_per_second", "peak_rss_gb"):
    assert figures[key] is not None, key
  assert figures["questions"] == 3
  # the policy's τ was fitted on the training questions and stored
  from racer_jax.runs import run_config
  saved = run_config.chosen(run_config.load(workdir), "hygrl_policy_tau")
  assert saved == figures["policy_tau"]
  # the comparison question's two passages are the seeds' own: a search
  # that adds k = 4 nodes per step finds both
  rows = [json.loads(l) for l in open(workdir / "eval" / "2wiki_all" / "questions.jsonl")]
  films = next(r for r in rows if r["id"] == "q-films")
  assert {3, 4} <= set(films["heuristic"][:5])
  assert films["heuristic_recall_at_5"] == 1.0   # per question, for pairing
  assert np.mean([r["policy_recall_at_5"] for r in rows]) == pytest.approx(
      figures["recall_at_5"])
  # other questions of the same corpus
  other = tmp_path / "other.jsonl"
  other.write_text(json.dumps(tiny.QUESTIONS[1]) + "\n")
  figures = evaluate_run.evaluate_run(
      evaluate_run.load_run_config(workdir), str(data), workdir,
      {"eval_file": str(other)}, progress=False)
  assert figures["questions"] == 1 and figures["split"] == "all"


@pytest.mark.slow
@pytest.mark.xdist_group("llama")
def test_the_llm_roles_on_a_real_model(llama_server, tmp_path):
  """One tiny run with SmolLM2 on llama.cpp in every LLM seat: the mentor
  prefers candidates and the judge reads the retrieved passages in the RL
  updates (counted in the checkpoint's record); then the evaluation's
  reader answers from the policy's passages and the explorer walks the
  passage graph, every figure computed from what the model returned."""
  from racer_jax.runs.checkpoints import Checkpointer
  data = tiny.write(tmp_path / "data")
  config = _tiny_config(steps=1)
  # hygrl.mentor / judge = "auto" (the config's default): the backend below
  assert (config.hygrl.mentor, config.hygrl.judge) == ("auto", "auto")
  config.hygrl.llm_pairs_per_question = 1
  config.agents.backend = "openai"
  config.agents.model = MODEL_ALIAS
  config.agents.base_url = llama_server
  config.agents.max_concurrency = 1
  workdir = tmp_path / "run"
  last = run_stage.train(config, str(data), workdir, progress=False)
  assert last["finite"] == 1.0
  ckpt = Checkpointer(workdir / "checkpoints")
  record = ckpt.record(ckpt.all_steps()[-1])
  ckpt.close()
  assert record["roles"] == {"mentor": "llm", "judge": "llm"}
  per_agent = record["llm"]["per_agent"]
  # two judgements (sample, greedy) per usable question, and mentor calls
  assert per_agent["judge"]["calls"] >= 2
  assert per_agent["mentor"]["calls"] >= 1

  def evaluate():
    return evaluate_run.evaluate_run(
        evaluate_run.load_run_config(workdir), str(data), workdir,
        {"backend": "openai", "model": MODEL_ALIAS, "base_url": llama_server,
         "max_questions": 2,
         "llm_setting": ["graph=explorer", "max_interactions=2",
                         "max_output_tokens=128", "thinking_budget=0",
                         "max_concurrency=1", "timeout_s=300"]},
        progress=False)
  figures = evaluate()
  assert figures["llm_questions"] == figures["explorer_questions"] == 2
  assert figures["llm"]["model"] == MODEL_ALIAS
  assert figures["reader_tokens_per_question"] > 0
  # the reader over the policy's ranking and over each baseline's
  assert figures["reader_rankings"] == ["policy", "bm25", "dense"]
  for key in ("valid_format_rate", "valid_call_rate", "evidence_hit_rate",
              "unfinished_at_limit", "explorer_accuracy", "reader_f1",
              "bm25_reader_f1", "dense_reader_exact_match"):
    assert 0.0 <= figures[key] <= 1.0, key
  assert 0.0 <= figures["calls_per_question"] <= 2
  rows = [json.loads(l) for l in open(workdir / "eval" / "2wiki_all" / "questions.jsonl")]
  read = [r for r in rows if "reader_answer" in r]
  assert len(read) == 2 and all("transcript" in r for r in read)
  assert sum(r["steps"] for r in read) >= 2
  # every failed call is counted, by category
  assert figures["explorer_failed_calls"] == sum(
      r["outcome"] == "invalid_protocol" for r in read)
  assert figures["reader_failed_calls"] == sum(
      r["reader_error"] is not None for r in read)
  assert sum(figures["reader_llm_errors"].values()) == figures[
      "reader_failed_calls"]
  # the replies now come from the cache: the same answers and the same
  # tokens per question (the method's cost, not what this run paid)
  again = evaluate()
  for key in ("reader_tokens_per_question", "explorer_tokens_per_question",
              "reader_f1", "valid_format_rate", "calls_per_question"):
    assert again[key] == figures[key], key


def _cross_encoder_config(relevance: str, epochs: int):
  """The tiny run with the MiniLM cross-encoder as m_ce (``relevance``),
  fine-tuned for ``epochs`` on lists of one gold and one negative."""
  config = _tiny_config(steps=1)
  config.text.encoder = "minilm"
  config.multihop.relevance = relevance
  config.multihop.reranker.negatives = 1
  config.multihop.reranker.epochs = epochs
  config.multihop.reranker.lists_per_batch = 2
  return config


@pytest.mark.slow
def test_a_tiny_run_with_the_cross_encoder(tmp_path, capsys):
  """``multihop.relevance=cross_encoder``: the MiniLM cross-encoder is
  fine-tuned on the training questions' lists (its loss falls), scores
  every subgraph node once (σ in (0, 1), 0 on padding), the policy reads
  it and the evaluation reports the reranker alone; a second evaluation
  reuses the cached scores; the embedding input is refused with it."""
  from racer_jax.errors import ConfigError
  data = tiny.write(tmp_path / "data")
  config = _cross_encoder_config("cross_encoder", epochs=8)
  config.multihop.reranker.learning_rate = 1e-4
  workdir = tmp_path / "run"
  run_stage.train(config, str(data), workdir, progress=False)
  line = next(l for l in capsys.readouterr().out.splitlines()
              if l.startswith("cross-encoder:"))
  first, last = (float(v) for v in
                 line.split("loss ")[1].split(" -> "))
  assert last < first, line
  tables = list(workdir.glob("relevance.*.npy"))
  assert len(tables) == 1
  table = np.load(tables[0])
  from racer_jax.hygrl.multihop_workspace import prepare
  ws = prepare(config, str(data), workdir / "prep", log=lambda _: None,
               progress=False)
  nodes = ws.arrays["nodes"]
  assert np.all((table > 0) & (table < 1) | (nodes < 0))
  assert np.all(table[nodes < 0] == 0)
  # the batched, padded scores are the model's on each pair alone
  from racer_jax.hygrl import multihop_relevance
  from racer_jax.hygrl.passage_reranker import PassageReranker
  reranker = PassageReranker.load(workdir / "reranker.msgpack",
                                  max_length=64)
  first = multihop_relevance.first_segment(ws, 0)
  pairs = [(first, multihop_relevance.node_text(ws, int(n)))
           for n in nodes[0][nodes[0] >= 0][:3]]
  alone = []
  for ids, type_ids in reranker.tokens(pairs):
    ids = np.asarray([ids], np.int32)
    alone.append(float(reranker.model.apply(
        {"params": reranker.params}, ids, np.asarray([type_ids], np.int32),
        ids != 0)[0]))
  np.testing.assert_allclose(reranker.score(pairs), alone, atol=1e-4)
  np.testing.assert_allclose(table[0][nodes[0] >= 0][:3],
                             1 / (1 + np.exp(-np.asarray(alone))), atol=1e-4)
  figures = evaluate_run.evaluate_run(
      evaluate_run.load_run_config(workdir), str(data), workdir, {},
      progress=False)
  assert figures["relevance"] == "cross_encoder"
  assert 0.0 <= figures["reranker_recall_at_5"] <= 1.0
  stamp = tables[0].stat().st_mtime_ns
  evaluate_run.evaluate_run(evaluate_run.load_run_config(workdir),
                            str(data), workdir, {}, progress=False)
  assert list(workdir.glob("relevance.*.npy")) == tables
  assert tables[0].stat().st_mtime_ns == stamp
  config.hygrl.policy_features = "embedding"
  with pytest.raises(ConfigError, match="policy_features"):
    run_stage.train(config, str(data), tmp_path / "other", progress=False)


@pytest.mark.slow
def test_a_tiny_run_with_the_cross_encoder_at_every_state(tmp_path):
  """``multihop.relevance=cross_encoder_state`` with ``node_pairs=
  cross_encoder``: the cross-encoder runs inside the jitted search at every
  state and gives the whole (2L+1) vector. Its entries equal the model on
  each host-tokenized pair (pair_text of the question and the window's
  titles; the question alone for the state entries; the window node's
  text and the candidate's for the node-to-node entries); with
  ``node_pairs=cosine`` those are the bi-encoder's; a run trains and
  evaluates with it; node_pairs=cross_encoder is refused without it."""
  from racer_jax.hygrl import multihop_relevance
  from racer_jax.hygrl import passages as hygrl_passages
  from racer_jax.hygrl.multihop_workspace import prepare
  from racer_jax.hygrl.passage_reranker import pair_text
  data = tiny.write(tmp_path / "data")
  from racer_jax.errors import ConfigError
  config = _cross_encoder_config("cross_encoder", epochs=1)
  config.multihop.node_pairs = "cross_encoder"
  with pytest.raises(ConfigError, match="needs multihop.relevance="
                     "cross_encoder_state"):
    run_stage.train(config, str(tmp_path / "data"), tmp_path / "refused",
                    progress=False)
  assert not (tmp_path / "refused" / "config.json").exists()  # before work
  config.multihop.relevance = "cross_encoder_state"
  config.multihop.reranker.pairs_per_chunk = -1
  with pytest.raises(ConfigError, match="pairs_per_chunk=-1"):
    run_stage.train(config, str(tmp_path / "data"), tmp_path / "refused",
                    progress=False)
  config = _cross_encoder_config("cross_encoder_state", epochs=1)
  config.multihop.node_pairs = "cross_encoder"
  # τ as set: the fit compiles the search (BERT inside) once per grid value
  config.multihop.fit_policy_tau = False
  workdir = tmp_path / "run"
  last = run_stage.train(config, str(data), workdir, progress=False)
  assert last["finite"] == 1.0
  assert not list(workdir.glob("relevance.*.npy"))  # no per-question table

  ws = prepare(config, str(data), workdir / "prep", log=lambda _: None,
               progress=False)
  reranker = multihop_relevance.add_relevance(config, ws, workdir,
                                              log=lambda _: None)
  tables = multihop_relevance.search_tables(config, ws, reranker)
  cfg = hygrl_state.hygrl_config(config)
  assert cfg.pair_scorer is not None
  row = 0
  x = hygrl_passages.passage_inputs(ws.batch([row], 1), tables, cfg)
  x = jax.tree.map(lambda a: a[0], x)
  nodes = ws.arrays["nodes"][row]
  real = np.flatnonzero(nodes >= 0)
  window = np.array([real[2], real[0], -1, -1], np.int32)
  in_seq = np.zeros(len(nodes), bool)
  in_seq[window[window >= 0]] = True
  state, action = jax.device_get(jax.jit(hygrl.score_features)(
      x, window, in_seq))
  question = ws.data.questions[row].question
  titles = [multihop_relevance.node_title(ws, int(nodes[j]))
            for j in window if j >= 0]
  texts = [multihop_relevance.node_text(ws, int(nodes[j])) for j in real]
  sig = lambda z: 1 / (1 + np.exp(-np.asarray(z)))
  joint = sig(reranker.score([pair_text(question, titles, t)
                              for t in texts]))
  np.testing.assert_allclose(action[real, -1], joint, atol=2e-4)
  assert np.all(action[nodes < 0, -1] == 0)
  alone = sig(reranker.score([(question, texts[2]), (question, texts[0])]))
  np.testing.assert_allclose(state[:, 0], [alone[0], alone[1], 0.0, 0.0],
                             atol=2e-4)
  for slot, first in enumerate([texts[2], texts[0]]):
    node = sig(reranker.score([(first, t) for t in texts]))
    np.testing.assert_allclose(action[real, slot], node, atol=2e-4)
  assert np.all(action[:, 2:4] == 0) and np.all(action[nodes < 0, :2] == 0)
  assert x.pair.scorer.chunk == 32 < 16 + 4 + 4 * 16  # scored in chunks
  with_scorer = lambda **k: x.replace(pair=x.pair.replace(
      scorer=dataclasses.replace(x.pair.scorer, **k)))
  whole = jax.device_get(jax.jit(hygrl.score_features)(
      with_scorer(chunk=0), window, in_seq)[1])
  np.testing.assert_allclose(whole, action, atol=1e-6)
  cosine = jax.device_get(jax.jit(hygrl.score_features)(
      with_scorer(node_pairs=False), window, in_seq)[1])
  np.testing.assert_allclose(cosine[:, -1], action[:, -1], atol=1e-6)
  emb = np.asarray(x.node_emb)
  np.testing.assert_allclose(cosine[:, :2], emb @ emb[window[:2]].T,
                             atol=1e-5)

  figures = evaluate_run.evaluate_run(
      evaluate_run.load_run_config(workdir), str(data), workdir, {},
      progress=False)
  assert figures["relevance"] == "cross_encoder_state"
  assert "reranker_recall_at_5" not in figures
  assert 0.0 <= figures["recall_at_5"] <= 1.0
