"""Host-side drivers: they read prepared data, feed the jitted programs,
write checkpoints and metrics. The arithmetic lives in ``graph/`` and
``rl/``; the entry points in ``launch/`` only parse flags and call these."""
