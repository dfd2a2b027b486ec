"""The run configurations (ml_collections), installed with racer_jax so that
`launch/` scripts can import them from anywhere: `default` holds every field
and its meaning; `demo`, `test`, `csqa` and `obqa` override it."""
