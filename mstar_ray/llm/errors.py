"""Errors of the LLM layer, importable without the ``openai`` package (the CLI catches them)."""


class EndpointError(RuntimeError):
    """An endpoint that cannot be used: says which role, which URL and which key variable."""


class BudgetExceeded(RuntimeError):
    """The run's budget (USD or tokens) is spent: no new paid call is admitted."""
