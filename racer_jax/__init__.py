"""racer_jax: explainable question answering by reinforced walks over a knowledge graph.

Importing the package changes nothing in the process: the entry points in
``launch/`` apply XLA's CPU defaults (:mod:`racer_jax.xla_cpu`) through
:func:`racer_jax.entry_point.run`.
"""

__version__ = "0.1.0"
