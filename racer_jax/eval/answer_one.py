"""Answering one new question with a trained answer run: ``launch/answer.py``.

:func:`open_pipeline` checks the run is an answer run and loads its stack
(the critic fitted on the run's validation slice first if this setup has
none stored, and in score mode the scoring critic's threshold too); :func:`checked_choices` refuses empty and repeated choices;
:func:`answer_text` is the human-readable output, which always says when an
LLM call failed and the local models answered instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from racer_jax.agents.pipeline import Pipeline
from racer_jax.errors import ConfigError, a_or_an
from racer_jax.llm import llm_backends
from racer_jax.runs import registry, run_config
from racer_jax.eval import calibration


def checked_choices(question: str, choices: Sequence[str]) -> list[str]:
  """The choices, stripped; an empty question, an empty or repeated choice,
  or fewer than two choices are refused."""
  if not question or not question.strip():
    raise ConfigError("--question is empty")
  out = [c.strip() for c in choices or []]
  if any(not c for c in out):
    raise ConfigError(f"--choices={','.join(choices)!r} has an empty choice")
  repeated = sorted({c for c in out if out.count(c) > 1})
  if repeated:
    raise ConfigError(f"--choices repeats {', '.join(repeated)}")
  if len(out) < 2:
    raise ConfigError("--choices needs at least two choices")
  return out


def answer_run_config(workdir):
  """The saved config of an answer run (ConfigError for any other run)."""
  path = Path(workdir) / "config.json"
  if not path.exists():
    raise ConfigError(f"{path} not found: --workdir must be an answer run "
                      "(launch/train.py --config.train.stage=answer)")
  config = run_config.load(workdir, "answer run")
  stage = config.train.stage
  if stage != "answer":
    kind = "hygrl" if config.method == "hygrl" else stage
    raise ConfigError(f"--workdir={workdir} is {a_or_an(kind)} run; answering needs "
                      "an answer run (--config.train.stage=answer), e.g. "
                      "runs/demo/answer")
  return config


def open_pipeline(workdir, data_dir=None, *, backend=None, model=None,
                  base_url=None, llm_settings=(), retrieval_workdir=None,
                  api_key=None, ensemble=(), dry_run: bool = False,
                  log: Callable[[str], None] = print) -> Pipeline:
  """The answer run's pipeline, its critic calibrated; ``backend``,
  ``model``, ``base_url`` and ``llm_settings`` (``FIELD=VALUE``) choose the
  LLM (:func:`~racer_jax.llm.llm_backends.evaluation_agents`)."""
  saved = answer_run_config(workdir)
  agents = llm_backends.evaluation_agents(
      saved, backend=backend, model=model, base_url=base_url,
      settings=llm_settings)
  if retrieval_workdir:
    agents.retrieval_workdir = retrieval_workdir
  if dry_run and agents.backend == "local":
    raise ConfigError("--dry_run shows what an LLM backend would be sent: "
                      "add " + registry.llm_backend_flags())
  quiet = (lambda _: None)
  pipeline = Pipeline(workdir, data_dir, agents=agents, api_key=api_key,
                      ensemble=list(ensemble), dry_run=dry_run, log=quiet)
  if pipeline.critic is None:  # first use of this setup: fit it once
    log("calibrating the critic on the answer run's validation slice "
        "(once for this setup) ...")
    pipeline.use_calibration(calibration.fit_critic(
        pipeline.stack, progress=False, log=quiet))
  stack = pipeline.stack
  if (stack.backend is not None and stack.agents.max_turns > 1 and
      stack.agents.answer_mode == "score"):
    record = calibration.fit_score_critic(stack, progress=False, log=quiet)
    pipeline.critic_source += (
        f"; the scoring critic ACCEPTs at P(ACCEPT) ≥ "
        f"{record['thresholds']['min_accept']:.3f} (validation)")
  return pipeline


def dry_run_record(pipeline: Pipeline) -> dict:
  """The prompts a dry run recorded and their counts."""
  backend = pipeline.stack.backend
  prompts = [{"agent": r.agent, "system": r.system, "user": r.user,
              "input_tokens": n, "cached_or_repeated": cached}
             for r, n, cached in backend.recorded]
  return {"dry_run": True, "llm_calls": len(prompts),
          "input_tokens": sum(p["input_tokens"] for p in prompts),
          "token_count": backend.token_count, "generate_calls_made": 0,
          "prompts": prompts}


def dry_run_text(record: dict) -> str:
  return "\n".join(
      f"===== call {i}: {p['agent']} ({p['input_tokens']} input tokens, "
      f"{record['token_count']}) =====\n[system] {p['system']}\n[user]\n"
      f"{p['user']}\n" for i, p in enumerate(record["prompts"], 1))


def answer_text(result, pipeline: Pipeline) -> str:
  """The answer, its rounds and paths; the LLM's use (and any fallback to
  the local models) on the last line when an LLM backend is in use."""
  text = result.explain()
  usage = pipeline.usage
  if usage.calls or usage.fallbacks:
    text += "\n" + usage.summary()
    if usage.fallbacks or usage.errors:
      text += (f"\nNOTE: {usage.fallbacks} answer(s) or verdict(s) came from "
               "the local models because LLM calls failed")
  return text
