"""Text environments for the episode family: a small adapter interface (``base``), TextWorldExpress and
ALFWorld adapters, and the helper process that hosts one (``worker``, driven by ``env_process.EnvProcess``), so
that an engine that hangs or crashes costs one episode, never the evaluation.

The adapters' own packages (a Java engine, TextWorld) are imported only inside the helper process; what is
checked here, in the caller's process, is only whether they are installed (``require``).
"""

from __future__ import annotations

from importlib import import_module

from mstar_ray.envs.base import EnvKind, Environment

# kind -> module; each module has ``require()`` (raises EnvUnavailable naming the fix) and the adapter class.
_ADAPTERS: dict[str, tuple[str, str]] = {
    "textworld_express": ("mstar_ray.envs.textworld_express", "TextWorldExpress"),
    "alfworld": ("mstar_ray.envs.alfworld", "ALFWorld"),
}


def require(kind: EnvKind) -> None:
    """Raise ``EnvUnavailable`` when this machine cannot run environments of ``kind``."""
    import_module(_ADAPTERS[kind][0]).require()


def make(kind: EnvKind) -> Environment:
    """A fresh adapter of ``kind``, with its engine started (in the process that calls this: the worker)."""
    module, cls = _ADAPTERS[kind]
    adapter: Environment = getattr(import_module(module), cls)()
    return adapter


__all__ = ["EnvKind", "Environment", "make", "require"]
