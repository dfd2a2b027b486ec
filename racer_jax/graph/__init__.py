"""Pure JAX graph functions: the whole capped graph the walker walks
(candidates, pruning, the BFS teacher's distances), the BFS teacher over a
padded question subgraph (HyGRL) and HyGRL's graph heuristics.

Nothing here reads files, prints or calls an LLM.
"""
