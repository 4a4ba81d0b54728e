"""The search's state outside Ray: the candidates on their way to the population, and the state replayed
from a run directory (for a resume, and for ``status``, ``report`` and ``export``)."""
