"""Host-side agents: Graph, Template, Answer and Critic, and the graph-tool
explorer (their LLM clients: :mod:`racer_jax.llm`)."""
