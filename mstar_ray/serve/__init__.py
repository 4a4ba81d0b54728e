"""Models served on the cluster itself with Ray Serve: the ``serve`` section of a run config (``config``), where
a llama.cpp model file comes from (``model_file``), the llama.cpp Serve deployment (``llama_cpp``), the thin
vLLM path through ``ray.serve.llm`` (``vllm``), whether a replica can fit the cluster (``fit``), the record of
a replica as the run log keeps it (``replicas``), and deploying, waiting, reusing and shutting down
(``deploy``).

``config``, ``model_file``, ``fit`` and ``replicas`` import no Ray; the rest is Ray at the edge, used by the
driver only."""
