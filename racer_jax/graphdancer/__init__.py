"""GraphDancer: an LLM that explores a graph through function calls in the
``<think>/<graph>/<answer>`` protocol — the graph functions
(:mod:`~racer_jax.graphdancer.tools`, over ConceptNet or a passage graph)
and the explorer loop with its GraphAgent (:mod:`~racer_jax.graphdancer.
explorer`)."""
