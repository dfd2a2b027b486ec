"""ConceptNet ingest, the CSR graph store, grounding and subgraph extraction.

NumPy only: nothing here imports jax.
"""
