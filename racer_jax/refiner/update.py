"""The refiner's jitted programs: candidate path sets from the (frozen)
walker, the refiner's training step, and its evaluation against baselines.

A question's candidate set is RACER's multi-path generation toward every
answer choice (``paths_per_choice`` walkers each, distinct paths only), so
P = C · N paths. A path is *positive* (gold-supporting) when it connects a
question concept to a concept of the gold answer (it visits one), so the
refiner learns which evidence supports the right answer, not merely which
paths reach some target.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from racer_jax.refiner import choice_scorer
from racer_jax.refiner import model as refiner_lib
from racer_jax.walker import rollout, update as walker_update
from racer_jax.walker.update import TrainState, WalkerTrainConfig, apply_guarded


@dataclasses.dataclass(frozen=True)
class RefinerConfig:
  paths_per_choice: int = 8
  sample_hops: int = -1
  temperature: float = 1.0
  top_k: int = 4
  loss: str = "listwise"
  max_question_concepts: int = 32  # the walker run's caps
  max_choice_concepts: int = 8
  # the choice head (racer_jax/refiner/choice_scorer.py): trained with a
  # softmax cross-entropy across choices, weighted by choice_weight
  choice_head: bool = False
  choice_weight: float = 1.0


def question_uniforms(key, example_index, walkers: int, steps: int):
  """float32 [B, W, T, 2]: each question's draws from its own dataset index
  (``example_index`` int32 [B]), so its paths do not depend on which
  questions share its batch (``--max_questions=N`` gives the full run's
  paths of those N)."""
  return jax.vmap(lambda i: jax.random.uniform(
      jax.random.fold_in(key, i), (walkers, steps, 2)))(example_index)


def path_sets(walker, walker_params, batch, rel_emb, rng,
              walker_cfg: WalkerTrainConfig, cfg: RefinerConfig,
              edge_quality, whole):
  """Multi-path generation toward every choice of every question: the
  frozen walker walks ``whole`` (the
  :class:`~racer_jax.walker.whole_graph.WholeGraph` its run walked) from the
  batch's grounded concepts; ``edge_quality`` [E2] (or None) is per global
  edge id.

  Returns a dict with leading axes [B, P] (P = C · paths_per_choice):
  ``nodes`` [.., T+1] (global concept ids), ``relations``/``edges``
  [.., T] (global edge ids), ``valid`` (distinct real paths),
  ``log_prob``, ``reached`` (its own target), ``choice`` (the target
  choice), ``positive`` (visits a gold concept).
  """
  rollout_cfg = dataclasses.replace(
      walker_cfg.rollout, temperature=cfg.temperature,
      sample_hops=cfg.sample_hops)
  goal = walker_update.goal_batch_from_graphs(
      batch, cfg.max_question_concepts, cfg.max_choice_concepts)
  c = goal.choice_concepts.shape[1]
  keys = jax.random.split(rng, c)

  def per_choice(choice, key):
    target = jnp.where(goal.choice_valid[:, choice], choice, -1)
    target = jnp.broadcast_to(target, goal.gold.shape).astype(jnp.int32)
    inputs = walker_update.goal_inputs(goal, whole, target,
                                       cfg.paths_per_choice)
    return rollout.multipath(walker, walker_params, whole, inputs, rel_emb,
                             key, rollout_cfg, walker_cfg.reward,
                             edge_quality, question_uniforms(
                                 key, goal.example_index,
                                 cfg.paths_per_choice, rollout_cfg.max_steps))

  traj, distinct, log_prob = jax.vmap(per_choice)(jnp.arange(c), keys)
  # [C, B, N, ...] -> [B, C * N, ...]
  flat = lambda x: jnp.moveaxis(x, 0, 1).reshape(
      (x.shape[1], -1) + x.shape[3:])
  gold = jnp.take_along_axis(goal.choice_concepts,
                             jnp.maximum(goal.gold, 0)[:, None, None],
                             axis=1)[:, 0]                            # [B, A]
  gold = jnp.where((goal.gold >= 0)[:, None], gold, -1)
  nodes = flat(traj.nodes)                                        # [B, P, T+1]
  positive = jnp.any((nodes[..., None] == gold[:, None, None, :]) &
                     (gold >= 0)[:, None, None, :], axis=(-1, -2))
  choice = jnp.broadcast_to(jnp.arange(c)[:, None, None], traj.reached.shape)
  return {"nodes": nodes, "relations": flat(traj.relations),
          "edges": flat(traj.edges), "valid": flat(distinct),
          "log_prob": flat(log_prob), "reached": flat(traj.reached),
          "choice": flat(choice), "positive": positive & flat(distinct)}


def path_features(concept_emb, rel_emb, paths):
  """Per-hop embeddings of the candidate paths: ``(head, relation, tail,
  hop_mask)`` with [B, P, T, d] and [B, P, T]."""
  nodes = paths["nodes"]
  head, tail = concept_emb[nodes[..., :-1]], concept_emb[nodes[..., 1:]]
  rel = rel_emb[jnp.maximum(paths["relations"], 0)]
  hop_mask = paths["edges"] >= 0
  return head, rel, tail, hop_mask


def intrinsic_features(paths, edge_quality=None):
  """float32 [B, P, F]: what each candidate path is, whatever the question
  (:data:`racer_jax.refiner.model.INTRINSIC_FEATURES`): the walker's
  log-probability of it, total and per hop; its hops over the walk's
  limit T; the shared memory's quality (−½…½, 0 unseen) of its edges, mean
  and least (0 without a memory). ``edge_quality`` [E2] is per global edge
  id."""
  edges = paths["edges"]                                          # [B, P, T]
  taken = edges >= 0
  hops = jnp.sum(taken, axis=-1).astype(jnp.float32)
  n = jnp.maximum(hops, 1.0)
  if edge_quality is None:
    quality = jnp.zeros(edges.shape, jnp.float32)
  else:
    quality = jnp.where(taken, edge_quality[jnp.maximum(edges, 0)], 0.0)
  log_prob = jnp.where(paths["valid"], paths["log_prob"], 0.0)
  return jnp.stack([
      log_prob, log_prob / n, hops / edges.shape[-1],
      jnp.sum(quality, axis=-1) / n,
      jnp.where(hops > 0, jnp.min(jnp.where(taken, quality, 1.0), axis=-1),
                0.0)], axis=-1)


def refiner_outputs(refiner, params, batch, concept_emb, rel_emb, paths,
                    edge_quality=None, mix=None):
  """Everything the refiner computes per question: ``score`` [B, P] (and
  ``alpha``, ``beta``) and, with its choice head, ``choice_logits`` /
  ``choice_logits_text`` [B, C] (see :mod:`racer_jax.refiner.choice_scorer`).
  ``mix``: λ instead of the refiner's own."""
  head, rel, tail, hop_mask = path_features(concept_emb, rel_emb, paths)
  choices = None
  if refiner.choice_head:
    choices = {"choice_emb": choice_scorer.choice_vectors(batch, concept_emb),
               "choice_valid": batch.choice_valid,
               "choice": paths["choice"], "reached": paths["reached"]}
  intrinsic = (intrinsic_features(paths, edge_quality)
               if refiner.beta == "intrinsic" else
               jnp.zeros(paths["valid"].shape +
                         (len(refiner_lib.INTRINSIC_FEATURES),)))
  out = jax.vmap(lambda h, r, t, m, v, q, c, i: refiner.apply(
      params, h, r, t, m, v, q, c, i, mix))(
          head, rel, tail, hop_mask, paths["valid"], batch.query, choices,
          intrinsic)
  out.pop("encoding")
  return out


def choice_figures(out, batch, labeled):
  """Per question [B]: ``choice_correct`` / ``choice_correct_text`` (the
  choice head's argmax is the gold; 0 where unlabeled)."""
  gold = jnp.maximum(batch.gold, 0)
  right = lambda logits: labeled & (jnp.argmax(logits, axis=-1) == gold)
  return {"choice_correct": right(out["choice_logits"]),
          "choice_correct_text": right(out["choice_logits_text"])}


def make_refiner_step(refiner, optimizer, walker, walker_cfg, cfg,
                      donate: bool = True):
  """``step(state, batch, walker_params, concept_emb, rel_emb,
  edge_quality, whole)`` -> ``(state, metrics)``: path generation with
  the frozen walker over the whole graph (:func:`path_sets`), the refiner
  loss, gradient and guarded optimizer step, as one jitted program."""
  loss_fn = {"listwise": refiner_lib.listwise_loss,
             "pairwise": refiner_lib.pairwise_loss}[cfg.loss]

  def step(state: TrainState, batch, walker_params, concept_emb, rel_emb,
           edge_quality, whole):
    rng = jax.random.fold_in(state.rng, state.step)
    paths = jax.lax.stop_gradient(path_sets(
        walker, walker_params, batch, rel_emb, rng, walker_cfg, cfg,
        edge_quality, whole))
    labeled = batch.example_mask & (batch.gold >= 0)

    def loss_of(params):
      out = refiner_outputs(refiner, params, batch, concept_emb, rel_emb,
                            paths, edge_quality)
      score = out["score"]
      per_q = jax.vmap(loss_fn)(score, paths["positive"], paths["valid"])
      n = jnp.maximum(jnp.sum(labeled), 1)
      mean = lambda x: jnp.sum(jnp.where(labeled, x, 0.0)) / n
      loss = path_loss = mean(per_q)
      top = jax.vmap(lambda s, p, v: refiner_lib.refine_metrics(
          s, p, v, cfg.top_k))(score, paths["positive"], paths["valid"])
      metrics = {"gold_in_topk": mean(top["gold_in_topk"]),
                 "paths": jnp.sum(paths["valid"]) / n}
      if cfg.choice_head:
        gold = jnp.where(labeled, batch.gold, -1)
        ce = mean(jax.vmap(choice_scorer.choice_loss)(out["choice_logits"],
                                                      gold))
        ce_text = mean(jax.vmap(choice_scorer.choice_loss)(
            out["choice_logits_text"], gold))
        loss = path_loss + cfg.choice_weight * (ce + ce_text)
        right = choice_figures(out, batch, labeled)
        metrics.update(path_loss=path_loss, choice_loss=ce,
                       choice_loss_text=ce_text,
                       choice_accuracy=mean(right["choice_correct"]),
                       choice_accuracy_text=mean(
                           right["choice_correct_text"]))
      return loss, dict(metrics, loss=loss)

    (loss, metrics), grads = jax.value_and_grad(loss_of, has_aux=True)(
        state.params)
    new_state, guard = apply_guarded(state, optimizer, loss, grads)
    return new_state, dict(metrics, **guard)

  return jax.jit(step, donate_argnums=(0,) if donate else ())


def make_refiner_eval(refiner, walker, walker_cfg, cfg, top_ks=(),
                      mixes=()):
  """``eval(refiner_params, batch, walker_params, concept_emb, rel_emb,
  edge_quality, rng, whole)`` -> per question [B]: for the refiner's
  top-k', a
  random k' and the top-k' by walker log-prob (total and per hop):
  ``gold_in_topk_*`` and
  ``positives_*`` / ``kept_*``; the same with the suffix ``@k`` for every
  k of the sweep ``top_ks``, and ``gold_in_topk_refiner_mix<λ>`` for
  every λ of ``mixes``; plus ``hit`` (a walk toward the gold choice
  reached it), ``any_positive`` and ``labeled``."""
  def evaluate(params, batch, walker_params, concept_emb, rel_emb,
               edge_quality, rng, whole):
    k_paths, k_random = jax.random.split(rng)
    paths = path_sets(walker, walker_params, batch, rel_emb, k_paths,
                      walker_cfg, cfg, edge_quality, whole)
    refined = refiner_outputs(refiner, params, batch, concept_emb, rel_emb,
                              paths, edge_quality)
    for lam in mixes:   # s = λα + (1 − λ)β for each λ (chosen on validation)
      s_lam = lam * refined["alpha"] + (1.0 - lam) * refined["beta"]
      out_lam = jax.vmap(lambda s, p, v: refiner_lib.refine_metrics(
          s, p, v, cfg.top_k))(s_lam, paths["positive"], paths["valid"])
      refined[f"gold_in_topk_refiner_mix{lam:g}"] = out_lam["gold_in_topk"]
    scores = {
        "refiner": refined["score"],
        "random": jax.random.uniform(k_random, paths["valid"].shape),
        "logprob": paths["log_prob"],
        # Length-normalized: the plain log-prob favours short paths.
        "logprob_per_hop": paths["log_prob"] / jnp.maximum(
            jnp.sum(paths["edges"] >= 0, axis=-1), 1),
    }
    out = {k: v for k, v in refined.items() if "_mix" in k}
    for k, suffix in [(cfg.top_k, "")] + [(k, f"@{k}") for k in top_ks]:
      for name, score in scores.items():
        m = jax.vmap(lambda s, p, v, k=k: refiner_lib.refine_metrics(
            s, p, v, k))(score, paths["positive"], paths["valid"])
        out[f"gold_in_topk_{name}{suffix}"] = m["gold_in_topk"]
        out[f"positives_{name}{suffix}"] = m["positives_in_topk"]
        out[f"kept_{name}{suffix}"] = m["kept"]
    toward_gold = paths["choice"] == batch.gold[:, None]
    out["hit"] = jnp.any(paths["reached"] & paths["valid"] & toward_gold,
                         axis=1)
    out["any_positive"] = jnp.any(paths["positive"], axis=1)
    out["labeled"] = batch.example_mask & (batch.gold >= 0)
    if refiner.choice_head:
      out.update(choice_figures(refined, batch, out["labeled"]))
      out["choice_logits"] = refined["choice_logits"]
    out["refiner_scores"] = scores["refiner"]
    out["paths"] = paths
    return out

  return jax.jit(evaluate)


def make_retriever(refiner, walker, walker_cfg, cfg):
  """``retrieve(refiner_params, batch, walker_params, concept_emb, rel_emb,
  edge_quality, rng, whole)`` -> the candidate paths of
  :func:`path_sets` plus
  ``score`` [B, P], the refiner's score of each, and with its choice head
  ``choice_logits`` [B, C] (jitted; the GraphAgent's device program)."""
  def retrieve(params, batch, walker_params, concept_emb, rel_emb,
               edge_quality, rng, whole):
    paths = path_sets(walker, walker_params, batch, rel_emb, rng,
                      walker_cfg, cfg, edge_quality, whole)
    refined = refiner_outputs(refiner, params, batch, concept_emb, rel_emb,
                              paths, edge_quality)
    out = dict(paths, score=jnp.where(paths["valid"], refined["score"],
                                      -jnp.inf))
    if "choice_logits" in refined:  # the refiner's choice head [B, C]
      out["choice_logits"] = refined["choice_logits"]
    return out

  return jax.jit(retrieve)
