"""racer_jax: explainable question answering by reinforced walks over a knowledge graph.

Import order matters for two things: :mod:`racer_jax.xla_cpu` sets XLA's CPU
vector width in ``XLA_FLAGS`` before jax creates its CPU client, and
:mod:`racer_jax.compat` patches the ``jax.tree_map``/``jax.tree_leaves`` aliases
that jraph 0.0.6 still calls, so it runs before anything here imports jraph.
"""

from racer_jax import xla_cpu as _xla_cpu

_xla_cpu.apply_defaults()

from racer_jax import compat as _compat  # noqa: E402,F401  (side effect: jraph shim)

__version__ = "0.1.0"
