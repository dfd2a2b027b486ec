"""Pure JAX over one padded question graph: the walk environment, the BFS
teacher and semantic action pruning. Callers ``vmap`` over questions.

Nothing here reads files, prints or calls an LLM.
"""
