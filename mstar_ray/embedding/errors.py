"""Errors of the embedding layer, importable without numpy, ``tokenizers`` or ``openai``."""


class EmbeddingModelMissing(RuntimeError):
    """The local model's files are not installed; the message names the install command."""


class EmbeddingEndpointError(RuntimeError):
    """An embeddings endpoint that cannot be used; the message names its URL and model."""
