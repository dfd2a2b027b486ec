"""HyGRL, read in one folder: the fused heuristics, the adaptive beam
(:mod:`~racer_jax.hygrl.beam`) and the policy's search (:mod:`~racer_jax.
hygrl.search`), imitation then SCST with pairwise margins
(:mod:`~racer_jax.hygrl.update`, :mod:`~racer_jax.hygrl.pairs`), its LLM
mentor and judge, its stages on CommonsenseQA and on multi-hop passage
graphs, their evaluations, and its GraphAgent. Pure JAX below the stage
drivers; above :mod:`racer_jax.eval`, below :mod:`racer_jax.train`."""
