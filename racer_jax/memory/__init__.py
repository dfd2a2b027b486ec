"""RACER's shared memory graph: per-edge outcome statistics across questions."""
