"""Embedders, all computed by the evaluating process (never in a sandbox): ``minilm`` (all-MiniLM-L6-v2 in
numpy), ``openai_embeddings`` (any /v1/embeddings server), ``hashing`` (lexical, no model), ``cached``
(the run-wide cache in front of any of them)."""
