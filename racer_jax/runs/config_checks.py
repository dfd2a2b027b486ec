"""Validation of a run's configuration before anything is built.

``check_config(config)`` raises :class:`racer_jax.errors.ConfigError`
naming the key for a value that cannot work, so a bad override fails at
once with a clear message instead of deep inside a jitted program: each
value against its field's declaration in ``configs/default.py`` (choices,
bounds, a field the schema does not have; :mod:`racer_jax.runs.
config_schema`), the registered names (stage, method, backend, answer
model, GraphAgent), then the rules across fields. Every launcher calls it
before any work; absl itself rejects overrides of the wrong type.
"""

from __future__ import annotations

import math

from configs import default as default_config
from racer_jax.errors import ConfigError
from racer_jax.runs import config_schema, registry

_get, _MISSING = config_schema.value_at, config_schema.MISSING


def _check_method_settings(config) -> None:
  """Combinations the multi-hop search cannot run."""
  method = _get(config, "method")
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
  errors = config_schema.field_errors(config, default_config.RunConfig())
  if errors:
    raise ConfigError(errors[0])
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
  _check_method_settings(config)
  stage, method = _get(config, "train.stage"), _get(config, "method")
  for own in ("hygrl_multihop", "graphdancer"):
    if (stage == own) != (method == own) and \
        not (method == own and stage == "walker"):
      raise ConfigError(
          f"train.stage={stage!r} with method={method!r}: method={own} "
          f"trains one stage (train.stage=walker or {own}, the name its "
          "runs are saved under); racer and hygrl train walker, refiner "
          "and answer")
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
