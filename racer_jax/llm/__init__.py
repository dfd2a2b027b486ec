"""The LLM clients behind one request/reply protocol (:mod:`racer_jax.llm.llm`):
Gemini (google-genai), any OpenAI-compatible server (the openai SDK) and a
language model inside JAX, registered by name (:mod:`racer_jax.llm.
llm_backends`); their response cache and usage reports."""
