"""The offline task agent: a deterministic, rule-based stand-in for an LLM, with no network and no key.

``OfflineBackend`` (``name = "offline"``) implements the protocol steps with string rules only:
schema fields are filled from cues in their names and types, questions are answered by picking the
context sentence that best matches the question and cutting a short span out of it, and a conversation
gets the context sentences most related to it as its reply. It is not a
language model and does not try to look like one; it exists so the whole search can run, be tested
and be reproduced byte for byte without an API. Its answers still depend on what the memory returns,
so a memory program that retrieves the evidence scores clearly better than one that does not.

Nothing here uses randomness, ``hash()`` or set iteration order, so outputs are identical across
processes regardless of ``PYTHONHASHSEED``.
"""

from mstar_ray.families.qa.offline import IDK
from mstar_ray.agent.offline.backend import OfflineBackend
from mstar_ray.agent.offline.toolkit import toolkit_answer

__all__ = ["IDK", "OfflineBackend", "toolkit_answer"]
