"""RACER's dual-attention path refiner in one room, read bottom up: the
model and its losses (``model``), the choice head (``choice_scorer``), the
jitted path generation, training step and evaluation (``update``), the
train state and the frozen walker it reads (``state``), the training stage
(``stage``) and the checkpoint evaluation (``evaluation``).
"""
