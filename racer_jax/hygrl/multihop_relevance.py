"""HyGRL's m_ce on the passage graph: the run's MiniLM cross-encoder
(:mod:`racer_jax.hygrl.passage_reranker`), fine-tuned on its training
questions.

* ``multihop.relevance=cross_encoder``: it scores every node of every
  question's subgraph once against the question and its seed entities.
  The table ``relevance`` float32 [Q, N] (σ of the logit; 0 on padding)
  joins the workspace's arrays; the policy reads it in HyGRL's (2L+1)-dim
  vector (:func:`racer_jax.hygrl.search.score_features`).
* ``multihop.relevance=cross_encoder_state``: the paper's m_ce(Q ⊕ N_s, a)
  at every search state, inside the jitted search. The workspace gets the
  questions' tokens (``pair_question``, ``pair_question_len``) and
  :func:`search_tables` the nodes' title and text tokens and the
  cross-encoder's parameters. With ``multihop.node_pairs=cross_encoder``
  it scores the node-to-node entries m_ce(n_i, a) as well (N + L + L·N
  pairs per state instead of N + L): the whole (2L+1) vector from the
  cross-encoder, as the paper has it.

Node text: ``title: text`` for a passage, ``title`` for an entity. The
gold labels choose the training lists only; the scores of any question
come from its text and subgraph.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from racer_jax.errors import ConfigError
from racer_jax.hygrl.multihop_workspace import MultiHopWorkspace
from racer_jax.hygrl.passage_reranker import (PassageReranker, pair_text,
                                              train_reranker)
from racer_jax.text import pair_tokens

RERANKER_FILE = "reranker.msgpack"


def node_title(ws: MultiHopWorkspace, node: int) -> str:
  """A passage's title, or an entity's name (entity p + i: passage i's
  title)."""
  p = ws.graph.num_passages
  return ws.data.titles[node - p if node >= p else node]


def node_text(ws: MultiHopWorkspace, node: int) -> str:
  """``title: text`` for a passage, the name for an entity."""
  if node < ws.graph.num_passages:
    return f"{ws.data.titles[node]}: {ws.data.texts[node]}"
  return node_title(ws, node)


def first_segment(ws: MultiHopWorkspace, i: int) -> str:
  """Question ``i`` ⊕ its seed entities' titles (the pair's first
  segment)."""
  titles = [node_title(ws, s) for s in ws.seeds[i]]
  return pair_text(ws.data.questions[i].question, titles, "")[0]


def training_lists(ws: MultiHopWorkspace, rows, negatives: int
                   ) -> list[list[tuple[str, str]]]:
  """One list per gold passage in a training question's subgraph: the gold
  pair, then the ``negatives`` non-gold subgraph passages closest to the
  question by the bi-encoder (fewer: the list is skipped)."""
  lists = []
  p = ws.graph.num_passages
  for i in rows:
    nodes = ws.arrays["nodes"][i]
    gold = ws.arrays["gold"][i]
    passages = (nodes >= 0) & (nodes < p)
    others = nodes[passages & ~gold]
    if len(others) < negatives:
      continue
    sims = ws.node_vecs[others] @ ws.question_vecs[i]
    hard = others[np.argsort(-sims, kind="stable")[:negatives]]
    first = first_segment(ws, i)
    for g in nodes[passages & gold]:
      lists.append([(first, node_text(ws, int(g)))] +
                   [(first, node_text(ws, int(n))) for n in hard])
  return lists


def relevance_table(ws: MultiHopWorkspace, reranker: PassageReranker,
                    rows=None, progress: bool = False) -> np.ndarray:
  """float32 [Q, N]: σ(cross-encoder logit) of every subgraph node of the
  questions ``rows`` (default all; other rows 0), 0 on padding."""
  nodes = ws.arrays["nodes"]
  rows = np.arange(len(nodes)) if rows is None else np.asarray(rows)
  pairs, where = [], []
  for i in rows:
    first = first_segment(ws, int(i))
    for j, n in enumerate(nodes[i]):
      if n >= 0:
        pairs.append((first, node_text(ws, int(n))))
        where.append((i, j))
  out = np.zeros(nodes.shape, np.float32)
  if pairs:
    logits = reranker.score(pairs, progress=progress,
                            desc="cross-encoder m_ce")
    r, c = np.asarray(where).T
    out[r, c] = 1.0 / (1.0 + np.exp(-logits))
  return out


def _digest(ws: MultiHopWorkspace, reranker_path: Path) -> str:
  h = hashlib.sha256(Path(reranker_path).read_bytes())
  h.update(ws.arrays["nodes"].tobytes())
  for i, q in enumerate(ws.data.questions):
    h.update(q.question.encode())
    h.update(repr(ws.seeds[i]).encode())
  return h.hexdigest()[:16]


def add_relevance(config, ws: MultiHopWorkspace, workdir, rows=None, *,
                  train: bool = False, progress: bool = True,
                  log: Callable[[str], None] = print) -> PassageReranker | None:
  """With ``multihop.relevance=cross_encoder``: the run's cross-encoder
  (fine-tuned on ``rows`` when ``train`` and not yet saved in ``workdir``)
  and ``ws.arrays["relevance"]`` (cached in the workdir, keyed by the
  weights, subgraphs and questions). Else nothing (None)."""
  m = config.multihop
  kind = m.relevance   # its combinations: racer_jax.runs.config_checks
  if kind == "bi_encoder":
    return None
  r = m.reranker
  path = Path(workdir) / RERANKER_FILE
  model_dir = config.text.model_dir or None
  if path.exists():
    reranker = PassageReranker.load(path, model_dir, r.max_length)
  elif not train:
    raise ConfigError(f"{path} is missing: this run's cross-encoder is "
                      "trained by launch/train.py")
  else:
    reranker = PassageReranker(model_dir, r.max_length, seed=config.seed)
    lists = training_lists(ws, rows, r.negatives)
    if not lists:
      raise ConfigError(
          f"no training question has a gold passage and {r.negatives} "
          "other passages in its subgraph: lower multihop.reranker."
          "negatives")
    train_reranker(reranker, lists, epochs=r.epochs,
                   lists_per_batch=r.lists_per_batch,
                   learning_rate=r.learning_rate, seed=config.seed,
                   progress=progress, log=log)
    tmp = path.with_suffix(".tmp")
    reranker.save(tmp)
    tmp.replace(path)
  if kind == "cross_encoder_state":
    q, q_len = pair_tokens.piece_table(
        reranker.tokenizer.wordpiece,
        [x.question for x in ws.data.questions], _budget(reranker))
    ws.arrays["pair_question"], ws.arrays["pair_question_len"] = q, q_len
    log(f"m_ce(Q ⊕ N_s, a): the cross-encoder at every search state "
        f"({r.max_length} tokens per pair"
        + (", node-to-node entries too)" if m.node_pairs ==
           "cross_encoder" else ")"))
    return reranker
  cache = Path(workdir) / (f"relevance.{Path(ws.data.source).stem}."
                           f"{_digest(ws, path)}.npy")
  if cache.exists():
    ws.arrays["relevance"] = np.load(cache)
  else:
    table = relevance_table(ws, reranker, progress=progress)
    np.save(cache.with_suffix(".tmp.npy"), table)
    cache.with_suffix(".tmp.npy").replace(cache)
    ws.arrays["relevance"] = table
  log(f"m_ce: the cross-encoder's relevance of "
      f"{int(np.sum(ws.arrays['nodes'] >= 0)):,} subgraph nodes")
  return reranker


def _budget(reranker: PassageReranker) -> int:
  """Tokens of the two segments together (:attr:`PairSpec.budget`)."""
  return pair_tokens.PairSpec.from_tokenizer(
      reranker.tokenizer.wordpiece, reranker.tokenizer.max_length).budget


def search_tables(config, ws: MultiHopWorkspace,
                  reranker: PassageReranker | None):
  """What the jitted search reads besides the batch: ``ws.node_vecs``, or
  with ``multihop.relevance=cross_encoder_state`` a dict of those, the
  cross-encoder's parameters and every node's title and text tokens (cut
  to the pair budget; :func:`racer_jax.text.pair_tokens.piece_table`).
  On the device."""
  if config.multihop.relevance != "cross_encoder_state":
    return jax.device_put(ws.node_vecs)
  tok = reranker.tokenizer.wordpiece
  budget = _budget(reranker)
  nodes = range(ws.node_vecs.shape[0])
  title_tok, title_len = pair_tokens.piece_table(
      tok, [node_title(ws, n) for n in nodes], budget)
  width = max(1, min(budget, int(title_len.max(initial=1))))
  text_tok, text_len = pair_tokens.piece_table(
      tok, [node_text(ws, n) for n in nodes], budget)
  return jax.device_put({
      "node_vecs": ws.node_vecs, "ce_params": reranker.params,
      "pair_titles": title_tok[:, :width], "pair_title_len": title_len,
      "pair_texts": text_tok, "pair_text_len": text_len})
