"""racer_jax: explainable question answering by reinforced walks over a knowledge graph.

Import order matters for one thing only: :mod:`racer_jax.compat` patches the
``jax.tree_map``/``jax.tree_leaves`` aliases that jraph 0.0.6 still calls, so it
runs before anything here imports jraph.
"""

from racer_jax import compat as _compat  # noqa: F401  (side effect: jraph shim)

__version__ = "0.1.0"
