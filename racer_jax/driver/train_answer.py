"""The AnswerAgent's local model: a cross-encoder fine-tuned on the training
split (``--config.train.stage=answer``).

Each question's choices are scored from ``question ⊕ choice ⊕ knowledge``
(:mod:`racer_jax.text.cross_encoder`); the knowledge is the GraphAgent's
refined paths toward the choice as template sentences, retrieved once from
the refiner run ``answer.knowledge_workdir`` and cached there (empty: the
same model without knowledge, the baseline). Cross-entropy over the choices,
AdamW with warmup and linear decay, one jitted update with the NaN guard;
checkpointed, resumable, evaluated on ``eval.split`` at the end. The
validation slice of the training split (``answer.validation_fraction``,
:mod:`racer_jax.data.validation`) is kept out of training and evaluated at
the end too (``validation_accuracy``); the critic is calibrated on it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from racer_jax.agents import choice_triples, openbook
from racer_jax.data import datasets, qa, validation
from racer_jax.driver import common
from racer_jax.driver.checkpoints import Checkpointer
from racer_jax.driver.loop import run_updates
from racer_jax.driver.metrics import MetricWriter
from racer_jax.memory import edge_memory
from racer_jax.rl import train as train_lib
from racer_jax.text import cross_encoder as ce


@dataclasses.dataclass
class AnswerData:
  """A split, tokenized: per question ``(ids, type_ids)`` per choice."""
  examples: list
  tokens: list
  gold: np.ndarray        # int32 [Q], -1 unlabeled
  num_choices: int
  knowledge: list | None  # [Q][C] sentences, None without knowledge

  def batch(self, tokenizer, rows):
    """(tokens [B, C, T] x3, choice_mask [B, C], gold [B], mask [B]);
    ``rows`` may hold -1 for padding questions."""
    rows = list(rows)
    real = [self.tokens[r] if r >= 0 else ([], []) for r in rows]
    tokens = tokenizer.pad(real, self.num_choices)
    choice_mask = tokens[2][:, :, 0]
    gold = np.array([self.gold[r] if r >= 0 else -1 for r in rows],
                    np.int32)
    return tokens, choice_mask, gold, np.array(rows) >= 0

  def subset(self, rows) -> "AnswerData":
    """The questions ``rows`` (e.g. the validation slice), in that order."""
    rows = [int(r) for r in rows]
    return AnswerData([self.examples[r] for r in rows],
                      [self.tokens[r] for r in rows], self.gold[rows],
                      self.num_choices,
                      [self.knowledge[r] for r in rows]
                      if self.knowledge else None)


def load_answer_data(config, data_dir, split: str, tokenizer,
                     knowledge=None) -> AnswerData:
  path = datasets.split_path(config, split, datasets.resolve_data_dir(
      data_dir))
  examples = load_examples(config, data_dir, split)
  c = config.batch.num_choices
  too_many = [e.id for e in examples if len(e.choices) > c]
  if too_many:
    raise ValueError(f"{path}: {len(too_many)} questions have more than "
                     f"batch.num_choices={c} choices (e.g. {too_many[0]})")
  tokens = [tokenizer.encode(e.stem, e.choices,
                             knowledge[i] if knowledge else None)
            for i, e in enumerate(examples)]
  gold = np.array([-1 if e.answer_index is None else e.answer_index
                   for e in examples], np.int32)
  return AnswerData(examples, tokens, gold, c, knowledge)


def knowledge_for(config, data_dir, splits, progress, log, cache_dir=None):
  """``{split: [Q][C] knowledge text}``: the training questions most like
  the question (``answer.similar_questions``; their index vectors cached in
  ``cache_dir``), the open book's facts (``use_openbook``), then per choice
  its own KG triples (``answer.choice_triples``) and the refined paths'
  sentences (``answer.knowledge_workdir``); ``None`` with none of them."""
  a = config.answer
  paths = None  # {split: [Q][C] [RetrievedPath]}
  if a.knowledge_workdir:
    from racer_jax.agents import knowledge as knowledge_lib
    paths = knowledge_lib.ensure_knowledge(
        a.knowledge_workdir, data_dir, splits, keep=a.paths_per_choice,
        batch_size=config.eval.batch_size, seed=config.seed,
        progress=progress, log=log)
    if a.get("reached_only", False):
      paths = {s: [[[p for p in ps if p.reached] for ps in choices]
                   for choices in k] for s, k in paths.items()}
  grounded = None  # (workspace, its config), loaded once for both below
  if a.get("choice_triples", 0) > 0 or config.get("use_openbook", False):
    grounded = _knowledge_workspace(config, data_dir, splits, progress, log)
  own = None  # the same for each choice's own triples
  if a.get("choice_triples", 0) > 0:
    own = choice_triples_for(config, grounded, splits, log)
  texts = None
  if paths is not None or own is not None:
    either = paths or own
    texts = {s: [[choice_triples.knowledge_text(
        own[s][q][j] if own else [], paths[s][q][j] if paths else [],
        a.max_sentences) for j in range(len(row))]
                 for q, row in enumerate(either[s])] for s in splits}
  if config.get("use_openbook", False):
    facts = openbook_texts(config, data_dir, grounded, splits, log)
    texts = {s: openbook.join_knowledge(facts[s], texts and texts[s])
             for s in splits}
  if a.get("similar_questions", 0) > 0:
    sim = similar_for(config, data_dir, cache_dir, log)
    texts = {s: openbook.join_knowledge(
        sim.per_choice(load_examples(config, data_dir, s),
                       a.similar_questions), texts and texts[s])
             for s in splits}
  return texts


def knowledge_sources(config) -> str:
  """The knowledge the answer model is shown, in words (for the log)."""
  a = config.answer
  parts = [f"{a.get('similar_questions', 0)} similar training questions"
           if a.get("similar_questions", 0) > 0 else "",
           "the open book" if config.get("use_openbook", False) else "",
           f"{a.choice_triples} triples per choice"
           if a.get("choice_triples", 0) > 0 else "",
           f"paths from {a.knowledge_workdir}" if a.knowledge_workdir else "",
           f"walker evidence from {a.evidence_workdir}"
           if a.get("evidence_workdir", "") else ""]
  return ", ".join(p for p in parts if p)


def similar_for(config, data_dir, cache_dir, log):
  """KEAR's index of similar training questions, cached in ``cache_dir``
  (None: not cached)."""
  from racer_jax.agents import similar_questions
  cache = (Path(cache_dir) / "similar_questions.npz" if cache_dir else None)
  return similar_questions.from_config(config, data_dir, cache, log)


def load_examples(config, data_dir, split: str) -> list:
  path = datasets.split_path(config, split, datasets.resolve_data_dir(
      data_dir))
  return qa.load_jsonl(path, on_bad_line=config.data.on_bad_line)[0]


def _knowledge_workspace(config, data_dir, splits, progress, log):
  """``(workspace, its config)`` the extra knowledge is grounded in: the
  retrieval run's (``answer.knowledge_workdir``), else this run's own
  prepared data (``prep_dir``)."""
  from racer_jax.driver.inputs import load_workspace
  source = config
  if not (config.answer.knowledge_workdir or config.prep_dir):
    raise ValueError("use_openbook or answer.choice_triples without "
                     "answer.knowledge_workdir needs --config.prep_dir (the "
                     "prepared store to ground in)")
  if config.answer.knowledge_workdir:
    source = ml_collections.ConfigDict(json.loads(
        (Path(config.answer.knowledge_workdir) / "config.json").read_text()))
  ws = load_workspace(source, data_dir, common.prep_dir_of(
      source, config.answer.knowledge_workdir), list(splits),
      progress=progress, log=log)
  return ws, source


def choice_triples_for(config, grounded, splits, log):
  """``{split: [Q][C] [RetrievedPath]}``: each choice's own KG triples;
  ``grounded`` from :func:`_knowledge_workspace`."""
  from racer_jax.driver.inputs import make_encoder
  ws, source = grounded
  ranker = choice_triples.ChoiceTriples(ws.kg, ws.concept_emb,
                                        make_encoder(source))
  k = config.answer.choice_triples
  out = {s: ranker.split(ws.splits[s].examples, ws.splits[s].subgraphs, k)
         for s in splits}
  shown = sum(len(c) for rows in out.values() for r in rows for c in r)
  total = sum(len(r) for rows in out.values() for r in rows)
  log(f"choice triples: {shown} for {total} choices (at most {k} each)")
  return out


def openbook_texts(config, data_dir, grounded, splits, log):
  """``{split: [Q][C] open-book facts}`` over the retrieval run's store
  (or this run's own prepared data without one); ``grounded`` from
  :func:`_knowledge_workspace`."""
  from racer_jax.driver.inputs import make_encoder
  ws, source = grounded
  book = openbook.make_openbook(config, data_dir, ws, make_encoder(source))
  k = config.openbook.facts_per_choice
  out = {s: book.split_texts(ws.splits[s].examples, ws.splits[s].subgraphs,
                             k) for s in splits}
  shown = sum(bool(t) for rows in out.values() for r in rows for t in r)
  total = sum(len(r) for rows in out.values() for r in rows)
  log(f"open book: {len(book.facts)} facts; {shown}/{total} choices got "
      f"at least one")
  return out


def create_state(config, tokenizer, num_steps: int):
  """``(model, optimizer, fresh TrainState)`` with pretrained BERT."""
  a = config.answer
  model = ce.CrossEncoder(tokenizer.config, dropout=a.dropout)
  schedule = optax.warmup_cosine_decay_schedule(
      0.0, a.learning_rate, max(1, int(a.warmup_fraction * num_steps)),
      max(num_steps, 2), end_value=0.0)
  optimizer = optax.chain(
      optax.clip_by_global_norm(config.train.grad_clip),
      optax.adamw(schedule, weight_decay=a.weight_decay))
  rng = jax.random.PRNGKey(config.seed)
  params = ce.init_params(model, config.text.model_dir or None,
                          jax.random.fold_in(rng, 0xa5))
  state = train_lib.TrainState(params=params, opt_state=optimizer.init(params),
                               step=jnp.zeros((), jnp.int32), rng=rng,
                               memory=edge_memory.empty(1))  # unused
  return model, optimizer, state


def make_answer_step(model, optimizer):
  def step(state, tokens, choice_mask, gold, example_mask):
    rng = jax.random.fold_in(state.rng, state.step)

    def loss_of(params):
      logits = ce.choice_logits(model, params, tokens, choice_mask, rng)
      loss = ce.choice_loss(logits, gold, example_mask)
      keep = example_mask & (gold >= 0)
      acc = jnp.sum((jnp.argmax(logits, -1) == gold) & keep) / jnp.maximum(
          keep.sum(), 1)
      return loss, {"loss": loss, "accuracy": acc}

    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(
        state.params)
    new_state, guard = train_lib.apply_guarded(state, optimizer, loss, grads)
    return new_state, dict(metrics, **guard)

  return jax.jit(step, donate_argnums=(0,))


def predict(model, params, data: AnswerData, tokenizer,
            batch_size: int) -> np.ndarray:
  """Choice probabilities float32 [Q, C] (0 for missing choices);
  questions run in order of length to keep padding small, a short last
  batch (or a loop round with few questions left) padded only to the next
  power of two (≥ 8), so few shapes compile and little is wasted."""
  forward = _forward(model)
  order = np.argsort([max(map(len, t[0])) for t in data.tokens],
                     kind="stable")
  probs = np.zeros((len(data.examples), data.num_choices), np.float32)
  for start in range(0, len(order), batch_size):
    rows = order[start:start + batch_size]
    width = min(batch_size, max(8, 1 << (len(rows) - 1).bit_length()))
    padded = np.concatenate([rows, -np.ones(width - len(rows), int)])
    tokens, choice_mask, _, _ = data.batch(tokenizer, padded)
    out = np.asarray(forward(params, tokens, choice_mask))
    probs[rows] = out[:len(rows)]
  return probs


_FORWARDS = {}


def _forward(model):
  if model not in _FORWARDS:
    _FORWARDS[model] = jax.jit(lambda p, tokens, cm: jax.nn.softmax(
        ce.choice_logits(model, p, tokens, cm), axis=-1))
  return _FORWARDS[model]


def accuracy(probs: np.ndarray, gold: np.ndarray) -> float:
  keep = gold >= 0
  return float(np.mean(np.argmax(probs[keep], -1) == gold[keep])) if (
      keep.any()) else 0.0


def train(config, data_dir, workdir, *, progress: bool = True,
          log: Callable[[str], None] = print,
          stop_after: int | None = None) -> dict:
  """Trains (or resumes) the answer model; once every update is done, the
  optional memory pass over the training split and the critic's
  calibration on the validation slice follow
  (:func:`racer_jax.eval.calibration.calibrate_after_training`; both reused
  when already done). Returns the last logged metrics plus
  ``critic_thresholds`` when the critic was calibrated."""
  last, finished = _train_model(config, data_dir, workdir,
                                progress=progress, log=log,
                                stop_after=stop_after)
  if not finished:
    return last
  from racer_jax.eval import calibration  # the evaluation sits above
  record = calibration.calibrate_after_training(
      config, data_dir, workdir, progress=progress, log=log)
  if record is not None:
    last = {**last, "critic_calibration": record["critic_calibration"],
            "critic_thresholds": record["thresholds"]}
  return last


def _train_model(config, data_dir, workdir, *, progress, log, stop_after):
  """``(last logged metrics, every update done)``."""
  workdir = Path(workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  common.save_run_config(config, workdir, "answer")
  a, t = config.answer, config.train
  eval_split = config.eval.split
  if a.get("model", "cross_encoder") == "frozen_head":
    from racer_jax.driver import train_answer_head
    knowledge = knowledge_for(config, data_dir, [t.split, eval_split],
                              progress, log, cache_dir=workdir)
    from racer_jax.agents import knowledge as knowledge_lib
    evidence = knowledge_lib.evidence_for(config, data_dir,
                                          [t.split, eval_split], progress, log)
    return train_answer_head.train(config, data_dir, workdir,
                                   knowledge=knowledge, evidence=evidence,
                                   progress=progress,
                                   log=log, stop_after=stop_after)
  if a.get("model", "cross_encoder") != "cross_encoder":
    raise ValueError(f"answer.model={a.model!r}: expected cross_encoder or "
                     "frozen_head")
  tokenizer = ce.ChoiceTokenizer(config.text.model_dir or None,
                                 max_length=a.max_length)
  knowledge = knowledge_for(config, data_dir, [t.split, eval_split],
                            progress, log, cache_dir=workdir)
  data = {s: load_answer_data(config, data_dir, s, tokenizer,
                              knowledge[s] if knowledge else None)
          for s in {t.split, eval_split}}
  train_data = data[t.split]
  # the validation slice is kept out of training (the critic is fitted on it)
  train_rows, val_rows = validation.split_rows(config,
                                               len(train_data.examples))
  val_data = train_data.subset(val_rows)
  n, bs = len(train_rows), a.batch_size
  per_epoch = -(-n // bs)
  total = max(1, int(round(a.epochs * per_epoch)))
  model, optimizer, state = create_state(config, tokenizer, total)
  ckpt = Checkpointer(workdir / "checkpoints", t.max_to_keep)
  restored = ckpt.restore_latest(state, log=log)
  if restored is not None:
    state = restored[0]
    log(f"resuming from step {int(state.step)}")
  start = int(state.step)
  log(f"answer model: {n} training questions ({len(val_rows)} held out for "
      f"validation), {total} updates of {bs}, knowledge "
      f"{knowledge_sources(config) if knowledge else 'off'}")
  step_fn = make_answer_step(model, optimizer)
  orders = {}

  def rows_for(step):
    epoch, i = divmod(step, per_epoch)
    if epoch not in orders:
      orders[epoch] = np.asarray(jax.random.permutation(
          jax.random.fold_in(jax.random.PRNGKey(config.seed), epoch), n))
    rows = train_rows[orders[epoch][i * bs:(i + 1) * bs]]
    return np.concatenate([rows, -np.ones(bs - len(rows), int)])

  def one_update(state, step):
    return step_fn(state, *train_data.batch(tokenizer, rows_for(step)))

  def evaluate(state, step):
    probs = predict(model, state.params, data[eval_split], tokenizer,
                    config.eval.batch_size)
    write_predictions(workdir / "eval" / f"{eval_split}_step{step}.answer"
                      ".jsonl", data[eval_split], probs)
    figures = {"accuracy": accuracy(probs, data[eval_split].gold)}
    if val_rows.size:
      val_probs = predict(model, state.params, val_data, tokenizer,
                          config.eval.batch_size)
      write_predictions(workdir / "eval" / f"validation_step{step}.answer"
                        ".jsonl", val_data, val_probs)
      figures["validation_accuracy"] = accuracy(val_probs, val_data.gold)
    return figures

  end = total if stop_after is None else min(total, start + stop_after)
  writer = MetricWriter(workdir, enabled=jax.process_index() == 0)
  state, last = run_updates(
      state, one_update, start=start, end=end, total=total, ckpt=ckpt,
      writer=writer, log_every=t.log_every,
      checkpoint_every=t.checkpoint_every,
      record=lambda done: {"step": done, "stage": "answer",
                           "config": json.loads(config.to_json())},
      evaluate=evaluate, eval_every=total, progress=progress,
      desc="train answer")
  writer.close()
  ckpt.close()
  return last, end == total


def write_predictions(path: Path, data: AnswerData, probs: np.ndarray):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    for i, e in enumerate(data.examples):
      f.write(json.dumps({
          "id": e.id, "gold": int(data.gold[i]),
          "prediction": int(np.argmax(probs[i])),
          "probs": [round(float(p), 5) for p in probs[i][:len(e.choices)]],
          **({"knowledge": data.knowledge[i]} if data.knowledge else {}),
      }) + "\n")
