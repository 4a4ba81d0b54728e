"""Errors of the LLM layer, importable without the ``openai`` package (the CLI catches them)."""


class EndpointError(RuntimeError):
    """An endpoint that cannot be used: says which role, which URL and which key variable."""


class RequestRefused(EndpointError):
    """The endpoint works but refused this one request for good (a 4xx other than 408/409/429, such as a
    prompt longer than the model's context): retrying the same request cannot help."""


class BudgetExceeded(RuntimeError):
    """The run's budget (USD or tokens) is spent: no new paid call is admitted."""
