"""Host-side agents: Graph, Template, Answer and Critic, the LLM backends
and the graph-tool explorer."""
