"""Compatibility shims for the libraries this project pins.

jraph 0.0.6.dev0 (unmaintained since 2022) still calls ``jax.tree_map`` and
``jax.tree_leaves``, which jax removed in 0.6. Functions such as
``jraph.zero_out_padding`` fail with ``AttributeError`` without them. Importing
this module (:mod:`racer_jax.data.batch`, the one module that uses jraph,
does) restores the two names as
aliases of ``jax.tree.map`` / ``jax.tree.leaves`` when they are missing, and
leaves jax untouched when they exist.
"""

import jax

if not hasattr(jax, "tree_map"):
  jax.tree_map = jax.tree.map
if not hasattr(jax, "tree_leaves"):
  jax.tree_leaves = jax.tree.leaves
