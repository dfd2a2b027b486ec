"""Validation of a run's configuration before anything is built.

``check_config(config)`` raises :class:`racer_jax.errors.ConfigError`
naming the key for a value that cannot work (a non-positive batch size, a
probability outside [0, 1], NaN, an unknown stage or backend), so a bad
command-line override fails at once with a clear message instead of deep
inside a jitted program. ``launch/train.py`` and ``launch/main.py`` call
it; absl itself rejects overrides of the wrong type (``flags.Error``).
"""

from __future__ import annotations

import math

from racer_jax.errors import ConfigError
from racer_jax.runs import registry

# key -> (kind, lower bound, upper bound); None: unbounded on that side.
_INT_AT_LEAST = {
    "batch.batch_size": 1, "batch.num_choices": 2, "batch.shards": 0,
    "multihop.reranker.pairs_per_chunk": 0,
    "train.num_steps": 0,
    "train.log_every": 1, "train.checkpoint_every": 1,
    "train.max_to_keep": 1, "train.eval_every": 0, "train.num_devices": 0,
    "walker.max_steps": 1, "walker.top_k": 1, "walker.num_walkers": 1,
    "walker.hidden": 1, "subgraph.max_nodes": 1, "subgraph.max_edges": 1,
    "subgraph.max_degree": 1, "eval.batch_size": 1, "eval.seeds": 1,
    "refiner.paths_per_choice": 1, "refiner.top_k": 1,
    "refiner.num_steps": 0, "answer.paths_per_choice": 1,
    "answer.max_sentences": 0, "answer.max_length": 8,
    "answer.batch_size": 1, "answer.choice_triples": 0,
    "answer.similar_questions": 0, "answer.validation_seed": 0,
    "agents.max_turns": 1, "agents.memory_train_questions": 0,
    "agents.max_output_tokens": 1, "agents.thinking_budget": -1,
    "agents.attempts": 1, "agents.max_concurrency": 1,
    "agents.score_critic_questions": 0,
    "openbook.facts_per_choice": 0, "answer.graph_hidden": 1,
    "answer.graph_layers": 1,
}
_FLOAT_RANGE = {
    "train.learning_rate": (0.0, None), "train.grad_clip": (0.0, None),
    "train.p_teacher": (0.0, 1.0), "train.p_teacher_final": (0.0, 1.0),
    "train.temperature": (0.0, None), "train.gamma": (0.0, 1.0),
    "train.entropy_coef": (0.0, None), "memory.prior": (0.0, None),
    "memory.gamma": (0.0, None), "refiner.learning_rate": (0.0, None),
    "refiner.temperature": (0.0, None), "answer.learning_rate": (0.0, None),
    "answer.epochs": (0.0, None), "answer.dropout": (0.0, 1.0),
    "answer.validation_fraction": (0.0, 1.0),
    "curriculum.start": (0.0, 1.0), "curriculum.ramp_fraction": (0.0, None),
    "curriculum.temperature": (0.0, None),
    "agents.temperature_step": (0.0, None),
    "agents.min_llm_answered": (0.0, 1.0), "agents.timeout_s": (0.0, None),
    "agents.temperature": (0.0, 2.0),
}
_STRICT_POSITIVE = {"train.learning_rate", "train.temperature",
                    "memory.prior", "refiner.learning_rate",
                    "refiner.temperature", "answer.learning_rate",
                    "answer.epochs", "curriculum.ramp_fraction",
                    "curriculum.temperature"}
_CHOICES = {
    "agents.answer_mode": ("generate", "score"),
    "refiner.beta": ("query", "intrinsic"),
    "hygrl.heuristic_semantic": ("auto", "cosine", "relevance"),
    "hygrl.pair_anchor": ("sequence", "current"),
    "agents.score_metric": ("acc", "acc_norm", "acc_pmi"),
    "agents.thinking_level": ("", "minimal", "low", "medium", "high"),
    "agents.reasoning_effort": ("", "minimal", "low", "medium", "high"),
    "agents.structured_output": ("auto", "json_schema", "json_object_schema",
                                 "json_object", "none"),
    "answer.similar_encoder": ("static", "minilm"),
    "walker.recurrent": ("gru", "lstm"),
    "multihop.relevance": ("bi_encoder", "cross_encoder",
                           "cross_encoder_state"),
    "multihop.node_pairs": ("cosine", "cross_encoder"),
}


def _get(config, key: str):
  node = config
  for part in key.split("."):
    if part not in node:
      return _MISSING
    node = node[part]
  return node


_MISSING = object()


def _check_method_settings(config) -> None:
  """Settings that do not apply to the config's method: the whole-graph
  walker's, the multi-hop search's."""
  method = _get(config, "method")
  if method == "racer" and _get(config, "walker.graph") == "kg":
    if _get(config, "walker.heuristic_weight"):
      raise ConfigError("walker.heuristic_weight: HyGRL's fused heuristic "
                        "is a subgraph prior; with walker.graph='kg' set it "
                        "to 0")
    if _get(config, "batch.shards") not in (0, 1, _MISSING):
      raise ConfigError("batch.shards: the whole-graph walker's batches are "
                        "small id arrays, every process reads them all; "
                        "leave batch.shards at 0")
    bandwidth = _get(config, "walker.bandwidth")
    if bandwidth is not _MISSING and (isinstance(bandwidth, bool) or
                                      not isinstance(bandwidth, int) or
                                      bandwidth < 1):
      raise ConfigError(f"walker.bandwidth={bandwidth!r}: the whole-graph "
                        "walker needs an integer >= 1")
  if method != "hygrl_multihop":
    return
  relevance = _get(config, "multihop.relevance")
  if _get(config, "multihop.node_pairs") == "cross_encoder" and \
      relevance != "cross_encoder_state":
    raise ConfigError(
        "multihop.node_pairs=cross_encoder scores m(n_i, a) at each search "
        "state: it needs multihop.relevance=cross_encoder_state (not "
        f"{relevance})")
  if relevance not in ("bi_encoder", _MISSING) and \
      _get(config, "hygrl.policy_features") == "embedding":
    raise ConfigError(f"multihop.relevance={relevance} feeds the (2L+1) "
                      "score vector: set hygrl.policy_features=scores (or "
                      "scores_heuristics)")


def check_config(config) -> None:
  """Raises :class:`ConfigError` for the first impossible value."""
  for key, low in _INT_AT_LEAST.items():
    v = _get(config, key)
    if v is _MISSING:
      continue
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
      raise ConfigError(f"{key}={v!r}: must be an integer ≥ {low}")
  for key, (low, high) in _FLOAT_RANGE.items():
    v = _get(config, key)
    if v is _MISSING:
      continue
    if isinstance(v, bool) or not isinstance(v, (int, float)) or \
        not math.isfinite(v):
      raise ConfigError(f"{key}={v!r}: must be a finite number")
    if v < low or (key in _STRICT_POSITIVE and v <= low) or (
        high is not None and v > high):
      bound = f"> {low}" if key in _STRICT_POSITIVE else f"≥ {low}"
      raise ConfigError(f"{key}={v!r}: must be {bound}"
                        + (f" and ≤ {high}" if high is not None else ""))
  for key, allowed in _CHOICES.items():
    v = _get(config, key)
    if v is not _MISSING and v not in allowed:
      raise ConfigError(f"{key}={v!r}: expected one of {list(allowed)}")
  for key, names in registry.BY_FIELD.items():
    v = _get(config, key)
    if v is not _MISSING:
      names.check(v)
  if _get(config, "answer.validation_fraction") == 1.0:
    raise ConfigError("answer.validation_fraction=1.0: must be < 1 (the "
                      "answer stage needs training questions)")
  for field, what in (("evidence_workdir", "the walker's evidence"),
                      ("graph_workdir", "the paths' graph")):
    run = _get(config, f"answer.{field}")
    readers = registry.answer_models_reading(field)
    if run not in (_MISSING, "") and _get(config, "answer.model") not in \
        readers:
      raise ConfigError(
          f"answer.{field}={run!r}: answer.model="
          f"{_get(config, 'answer.model')!r} does not read {what} (the "
          f"answer models that do: {readers})")
  evidence = _get(config, "answer.evidence_workdir")
  if _get(config, "answer.evidence_choice_head") is True and \
      evidence in (_MISSING, ""):
    raise ConfigError("answer.evidence_choice_head=True reads the choice "
                      "head of the refiner run in answer.evidence_workdir; "
                      "set answer.evidence_workdir (and an answer.model of "
                      f"{registry.answer_models_reading('evidence_workdir')})")
  if (_get(config, "memory.train_failures") is True and
      _get(config, "memory.enabled") is True and
      _get(config, "walker.graph") not in ("kg", _MISSING)):
    raise ConfigError("memory.train_failures=True: only the whole-graph "
                      "walker (walker.graph='kg') records its training "
                      "walks' failures; set it False for the subgraph walker")
  _check_method_settings(config)
  stage, method = _get(config, "train.stage"), _get(config, "method")
  if (stage == "hygrl_multihop") != (method == "hygrl_multihop") and \
      not (method == "hygrl_multihop" and stage == "walker"):
    raise ConfigError(
        f"train.stage={stage!r} with method={method!r}: method="
        "hygrl_multihop trains one stage, the passage search (train.stage="
        "walker or hygrl_multihop, the name its runs are saved under); the "
        "other methods train walker, refiner and answer")
  weights = _get(config, "curriculum.weights")
  if weights is not _MISSING:
    w = list(weights)
    if len(w) != 3 or any(not isinstance(x, (int, float)) or
                          not math.isfinite(x) or x < 0 for x in w) or \
        sum(w) == 0:
      raise ConfigError(f"curriculum.weights={weights!r}: three "
                        "non-negative numbers, not all 0")
  ks = _get(config, "answer.paths_per_choice_candidates")
  if ks is not _MISSING and ks and any(
      isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
    raise ConfigError(f"answer.paths_per_choice_candidates={ks!r}: whole "
                      "numbers >= 1 (the k' to choose among on validation), "
                      "or () to keep answer.paths_per_choice")
  if "batch" not in config:  # a section alone (the agents' settings)
    return
  batch, devices = config.batch.batch_size, config.train.num_devices
  if devices and batch % devices:
    raise ConfigError(f"batch.batch_size={batch} is not divisible by "
                      f"train.num_devices={devices}")
  shards = _get(config, "batch.shards")
  if shards is not _MISSING and shards and batch % shards:
    raise ConfigError(f"batch.batch_size={batch} is not divisible by "
                      f"batch.shards={shards}")
