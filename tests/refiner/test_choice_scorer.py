"""The refiner's choice head: masking, invariances, and learning to tell the
gold choice from distractors from the paths where the choice names alone
carry no signal."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from racer_jax.refiner import choice_scorer, model as refiner

C, N, T, D = 4, 3, 3, 8   # choices, walks per choice, hops, vector size
P = C * N


def make_question(rng, gold):
  """One question: N walks aimed at each choice; those at the gold reach it
  and their tails lie near the query, most distractors' walks end
  elsewhere. The choice vectors are random: no signal without the paths."""
  query = rng.normal(size=(D,)).astype(np.float32)
  head, relation, tail = (rng.normal(size=(P, T, D)).astype(np.float32)
                          for _ in range(3))
  choice = np.repeat(np.arange(C), N).astype(np.int32)
  reached = rng.random(P) < 0.3
  reached[choice == gold] = True
  tail[choice == gold] = query + 0.3 * rng.normal(size=(N, T, D))
  return dict(head=head, relation=relation, tail=tail,
              hop_mask=np.ones((P, T), bool), path_mask=np.ones(P, bool),
              query=query,
              choices={"choice_emb": rng.normal(size=(C, D)).astype(
                  np.float32), "choice_valid": np.ones(C, bool),
                       "choice": choice, "reached": reached})


def stack(questions):
  return jax.tree.map(lambda *x: jnp.asarray(np.stack(x)), *questions)


@functools.cache
def setup():
  model = refiner.PathRefiner(hidden=16, num_heads=4, choice_head=True)
  params = refiner.init_refiner(model, jax.random.PRNGKey(0), P, T, D)
  return model, params


def apply(model, params, q):
  return model.apply(params, q["head"], q["relation"], q["tail"],
                     q["hop_mask"], q["path_mask"], q["query"], q["choices"])


def test_masked_choices_and_paths_that_did_not_reach():
  model, params = setup()
  q = jax.tree.map(jnp.asarray, make_question(np.random.default_rng(0), 2))
  out = apply(model, params, q)
  assert out["choice_logits"].shape == (C,) and out["encoding"].shape[0] == P
  valid = q["choices"]["choice_valid"].at[3].set(False)
  masked = apply(model, params, {**q, "choices": {**q["choices"],
                                                  "choice_valid": valid}})
  assert masked["choice_logits"][3] == choice_scorer.MASKED_LOGIT
  # the text-only scorer does not read the paths at all
  moved = {**q, "tail": q["tail"] + 5.0}
  np.testing.assert_array_equal(apply(model, params, moved)[
      "choice_logits_text"], out["choice_logits_text"])
  # a path-free refiner has no choice head and no choice parameters
  plain = refiner.PathRefiner(hidden=16, num_heads=4)
  pp = refiner.init_refiner(plain, jax.random.PRNGKey(0), P, T, D)
  assert "choice" not in pp["params"] and "choice" in params["params"]


def test_choice_order_is_equivariant():
  model, params = setup()
  q = jax.tree.map(jnp.asarray, make_question(np.random.default_rng(1), 0))
  perm = np.array([2, 0, 3, 1])          # new choice j is old choice perm[j]
  inverse = np.argsort(perm)
  c = q["choices"]
  permuted = {**q, "choices": {**c, "choice_emb": c["choice_emb"][perm],
                               "choice": jnp.asarray(inverse)[c["choice"]]}}
  a, b = apply(model, params, q), apply(model, params, permuted)
  for key in ("choice_logits", "choice_logits_text"):
    np.testing.assert_allclose(b[key], a[key][perm], rtol=1e-5, atol=1e-5)


def test_learning_tells_the_gold_apart_from_paths_not_from_names():
  rng = np.random.default_rng(3)
  gold_train = rng.integers(0, C, 64)
  gold_test = rng.integers(0, C, 64)
  train = stack([make_question(rng, g) for g in gold_train])
  test = stack([make_question(rng, g) for g in gold_test])
  model, params = setup()
  batched = jax.vmap(lambda p, q: apply(model, p, q), in_axes=(None, 0))
  opt = optax.adam(3e-3)

  def loss_fn(params, gold):
    out = batched(params, train)
    ce = jax.vmap(choice_scorer.choice_loss)
    return jnp.mean(ce(out["choice_logits"], gold) +
                    ce(out["choice_logits_text"], gold))

  def accuracy(params, data, gold):
    out = batched(params, data)
    return (jnp.mean(jnp.argmax(out["choice_logits"], -1) == gold),
            jnp.mean(jnp.argmax(out["choice_logits_text"], -1) == gold))

  @jax.jit
  def fit(params, gold):
    def step(carry, _):
      params, state = carry
      grads = jax.grad(loss_fn)(params, gold)
      updates, state = opt.update(grads, state)
      return (optax.apply_updates(params, updates), state), None
    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)),
                                  length=300)
    return params

  before, _ = accuracy(params, test, jnp.asarray(gold_test))
  trained = fit(params, jnp.asarray(gold_train))
  with_paths, text_only = accuracy(trained, test, jnp.asarray(gold_test))
  assert float(with_paths) >= 0.8 and float(with_paths) > float(before) + 0.3
  assert float(text_only) <= 0.45  # names carry no signal: near chance


def test_choice_vectors_average_each_choices_concepts():
  class Batch:  # the fields choice_vectors reads, as a subgraph batch has
    pass
  b = Batch()
  b.graphs = type("G", (), {"nodes": {"concept": jnp.asarray([[0, 1, 2, 3]])}})
  b.node_mask = jnp.asarray([[True, True, True, False]])
  mask = np.zeros((1, 4, 3), bool)
  mask[0, 0, 0] = mask[0, 1, 0] = True   # choice 0: concepts 0 and 1
  mask[0, 3, 1] = True                   # choice 1: a padded node only
  b.choice_mask = jnp.asarray(mask)
  emb = jnp.asarray(np.arange(8, dtype=np.float32).reshape(4, 2))
  out = np.asarray(choice_scorer.choice_vectors(b, emb))
  np.testing.assert_allclose(out[0, 0], [1.0, 2.0])
  np.testing.assert_allclose(out[0, 1], [0.0, 0.0])
  np.testing.assert_allclose(out[0, 2], [0.0, 0.0])
