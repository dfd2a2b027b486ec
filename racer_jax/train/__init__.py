"""The drivers: each training stage of the walker, refiner and answer model,
the main job that chains them, and the dispatch of every evaluation kind
(:mod:`~racer_jax.train.evaluate_run`). HyGRL's stages live in
:mod:`racer_jax.hygrl`."""
