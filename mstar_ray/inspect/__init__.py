"""Looking at a run from its directory alone, live or finished: ``status``, ``export`` and ``report``."""
