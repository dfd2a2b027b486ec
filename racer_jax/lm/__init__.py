"""A causal language model inside the JAX program (tunix's Flax models),
its tokenizer and chat template, and choice scoring by log-likelihood."""
