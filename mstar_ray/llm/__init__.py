"""Clients for real models behind OpenAI-compatible endpoints (OpenAI, Azure, OpenRouter, vLLM, llama.cpp)."""
