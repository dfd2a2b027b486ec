"""The explorer_ppo benchmark (the issue's accelerator check) runs one
rollout and one PPO update at a batch and reports their figures."""

import sys

import numpy as np
import pytest

pytest.importorskip("tunix", reason="the LM extra: pip install -e '.[lm]'")
pytest.importorskip("gguf", reason="the LM extra: pip install -e '.[lm]'")

from tests.conftest import REPO  # noqa: E402
from tests.lm import tiny_gguf  # noqa: E402

sys.path.insert(0, str(REPO / "launch"))
from bench import explorer_bench  # noqa: E402


@pytest.mark.slow   # the tiny model's programs compile: ~30 s
def test_one_update_at_a_batch(tmp_path):
  path = tmp_path / "tiny.gguf"
  tiny_gguf.write_tiny_llama(path)
  options = explorer_bench.ExplorerOptions(
      explorer_model=str(path), explorer_batch=4, explorer_micro_batch=2,
      explorer_prompt_tokens=32, explorer_response_tokens=48,
      explorer_step_tokens=4)
  figures = explorer_bench.bench_explorer(options, log=lambda _: None)
  for key in ("explorer_sampled_tokens_per_second", "explorer_update_seconds",
              "explorer_update_tokens_per_second", "peak_rss_gb"):
    assert figures[key] > 0, key
  assert np.isfinite(figures["explorer_policy_loss"])
  assert figures["explorer_batch"] == 4
