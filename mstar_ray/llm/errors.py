"""Errors of the LLM layer, importable without the ``openai`` package (the CLI catches them)."""

from mstar_ray.exit_codes import InfrastructureError


class EndpointError(InfrastructureError):
    """An endpoint that cannot be used: says which role, which URL and which key variable."""


class RequestRefused(EndpointError):
    """The endpoint works but refused this one request for good (a 4xx other than 408/409/429, such as a
    prompt longer than the model's context): retrying the same request cannot help."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status

    @property
    def by_content(self) -> bool:
        """Refused for what the request holds (400 Bad Request, e.g. a prompt beyond the context; 413 too large;
        422 unprocessable), not for who sent it or where (401, 403, 404: the endpoint's configuration)."""
        return self.status in (400, 413, 422)


class BudgetExceeded(RuntimeError):
    """The run's budget (USD or tokens) is spent: no new paid call is admitted."""
