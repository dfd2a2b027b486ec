"""RACER's GraphAgent walker in one room, read bottom up: the whole capped
graph it walks (``whole_graph``), its policy (``policy``), the composite
reward (``reward``) and the rollout whose step returns it (``rollout``), the
losses and the jitted update and evaluation programs (``losses``,
``update``), its batches (``inputs``), the run's host side (``run``), the
training stage (``stage``) and the checkpoint evaluation (``evaluation``).
"""
