"""The offline task agent: a deterministic, rule-based stand-in for an LLM, with no network and no key.

``OfflineBackend`` (``name = "offline"``) implements the shared steps with string rules only: schema fields
are filled from cues in their names and types, questions become queries the same way, and a memory program's
toolkit request is read for what it asks (``toolkit``). A family's own steps (answering a question, replying
to a conversation, picking an action) are each that family's stand-in, which the family defines beside its
prompt (``mstar_ray.families``). It is not a language model and does not try to look like one; it exists so
the whole search can run, be tested and be reproduced byte for byte without an API. Its answers still depend
on what the memory returns, so a memory program that retrieves the evidence scores clearly better than one
that does not.

Nothing here uses randomness, ``hash()`` or set iteration order, so outputs are identical across
processes regardless of ``PYTHONHASHSEED``.
"""

from mstar_ray.agent.offline.backend import OfflineBackend
from mstar_ray.agent.offline.completions import toolkit_answer

__all__ = ["OfflineBackend", "toolkit_answer"]
