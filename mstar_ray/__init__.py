"""mstar-ray: a distributed, resumable, sandboxed search for LLM-agent memory programs (M*)."""

__version__ = "0.1.0"
