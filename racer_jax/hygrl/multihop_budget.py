"""The trained policy's beam threshold τ at HyGRL-Heuristic's node budget,
fitted on the training questions.

The policy's probabilities and the fused heuristic's are on different
scales, so one τ gives the two searches different budgets (on 2Wiki the
policy at τ = 0.5 stopped after its first step). The policy's τ is chosen
from :data:`TAUS` so that the nodes it adds on the training questions
match, on average, what the heuristic adds at its own τ; the value is
stored in the run's ``config.json`` (``chosen_on_validation``) and used by
every evaluation.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from racer_jax.hygrl.multihop_state import train_rows
from racer_jax.runs import run_config

TAUS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
        0.6, 0.7)
FIELD = "hygrl_policy_tau"


def fit_policy_tau(retriever_cls, config, ws, params, theta, rows,
                   size: int, tables=None) -> tuple[float, dict]:
  """``(τ, figures)``: the τ of ``multihop.policy_tau_grid`` (default
  :data:`TAUS`) whose mean nodes added on ``rows`` is closest to the
  heuristic's (ties: the larger τ). Each τ compiles the search anew.
  ``tables``: the search's tables (default the node vectors;
  :func:`racer_jax.hygrl.multihop_relevance.search_tables`)."""
  taus = tuple(float(t) for t in config.multihop.policy_tau_grid)
  node_vecs = (jax.device_put(ws.node_vecs) if tables is None
               else tables)
  _, cost = retriever_cls(config, params, theta).rank(ws, rows, node_vecs,
                                                      size, 1)
  target = float(np.mean(cost["heuristic"]["added"]))
  added = {}
  for tau in taus:
    _, cost = retriever_cls(config, params, theta, policy_tau=tau).rank(
        ws, rows, node_vecs, size, 1)
    added[tau] = float(np.mean(cost["policy"]["added"]))
  best = min(taus, key=lambda t: (abs(added[t] - target), -t))
  return best, {"heuristic_nodes_added_train": target,
                "policy_nodes_added_train": added[best],
                "policy_tau_sweep": added}


def chosen_policy_tau(retriever_cls, config, workdir, ws, params, theta,
                      log=print, train_ws=None, tables=None) -> float:
  """The run's fitted τ; fitted now (and stored) when the run has none.
  ``train_ws``: the workspace holding the training questions when ``ws``
  does not (an ``--eval_file`` evaluation)."""
  if not config.multihop.fit_policy_tau:
    return float(config.hygrl.tau)
  saved = run_config.chosen(run_config.load(workdir, "HyGRL multi-hop run"),
                            FIELD)
  if saved is not None:
    return float(saved)
  source = train_ws or ws
  rows = train_rows(config, source)
  tau, figures = fit_policy_tau(retriever_cls, config, source, params,
                                theta, rows, config.eval.batch_size,
                                tables)
  log(f"policy τ = {tau} on {len(rows)} training questions: it adds "
      f"{figures['policy_nodes_added_train']:.2f} nodes, the heuristic "
      f"{figures['heuristic_nodes_added_train']:.2f}")
  run_config.record_chosen(Path(workdir), **{FIELD: tau})
  return tau
