"""QA data: loaders, grounding into graphs, padded batches, the demo set."""
