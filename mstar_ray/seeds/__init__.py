"""The seed library: memory programs a search can start from, shipped inside the package.

The programs live in ``programs/`` as package data (each one a file, checked and run like any candidate;
the engine never imports them). This catalogue names them: one line on the idea, the design it comes from.
Each program's docstring says more, including what of its source design was left out and why.
``search.seeds`` in a run config takes these names or paths to program files (``resolve``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mstar_ray.exit_codes import InputError, MissingInput

PROGRAMS = Path(__file__).resolve().parent / "programs"


@dataclass(frozen=True)
class SeedEntry:
    """``version`` counts changes to the program (each one a new program id): a run keeps the sources it
    started from in its run directory, so a run started on an earlier version resumes on that version."""

    name: str
    idea: str
    source: str
    version: int = 1
    changes: str = ""  # what the latest version changed, and why

    @property
    def path(self) -> Path:
        return PROGRAMS / f"{self.name}.py"


LIBRARY: tuple[SeedEntry, ...] = (
    SeedEntry("vector_search", "raw-text chunks in Chroma, each with its date; read returns the 5 most similar, no LLM",
              "M* paper seed", version=2,
              changes="chunks cut at line ends and each opening with its session's [date] (v1: only a session's "
                      "first chunk had it), a long line's pieces keep their speaker"),
    SeedEntry("llm_summarizer", "raw text in SQLite; read = one LLM call summarising it for the query", "M* paper seed",
              version=2,
              changes="each stored text gives the call at most 2,000 characters (its header and best-matching "
                      "lines), so one long session no longer ends the material (v1 stopped at the first text over "
                      "the 6,000-character budget)"),
    SeedEntry("experience_learner", "lists of lessons and facts; read returns them, most related first", "M* paper seed"),
    SeedEntry("selfmem", "immutable SQLite transcript; read = one LLM-written read-only SQL query, keyword fallback",
              "SelfMem (2026)"),
    SeedEntry("memory_lace", "atomic dated memories with merge / supersede / conflict relations; reads expand "
              "active anchors along them", "MemoryLACE (2026)"),
    SeedEntry("memrl", "intent-experience-utility triples; similarity gate, then similarity + utility learnt "
              "from feedback", "MemRL (2026)"),
    SeedEntry("rulemem", "facts plus induced IF-THEN rules; a question activates rules, then facts meeting "
              "their premises", "RuleMem (2026)"),
    SeedEntry("grounding", "propose, probe source and store, then commit / revise / narrow / skip",
              "Grounding Agent Memory (2026)"),
    SeedEntry("memforest", "event trees by similarity and time continuity; merge instead of delete; reads "
              "propagate along neighbours", "MemForest (2026)"),
    SeedEntry("memskill", "per-item choice among extract / consolidate / prune skills, by rules",
              "MemSkill (2026)"),
)
# The paper's three seeds: the default population (search.seeds when a config names none).
PAPER_SEEDS: tuple[str, ...] = ("vector_search", "llm_summarizer", "experience_learner")
# Designs in the survey that need model internals or weights, so no memory program can hold them.
NOT_SEEDABLE = {
    "FocusMem": "continuous latent memory tokens read by a trained policy: needs model representations and training",
    "TMEM": "experience written into fast LoRA weights by online fine-tuning: needs model weights",
}


class UnknownSeed(InputError):
    """A seed name that is not in the library (the message lists the valid names)."""


def entry(name: str) -> SeedEntry:
    for seed in LIBRARY:
        if seed.name == name:
            return seed
    raise UnknownSeed(f"unknown seed {name!r}; the library has: {', '.join(s.name for s in LIBRARY)} "
                      "(or give a path to a program file, ending in .py)")


def is_name(seed: str) -> bool:
    """A library name is a bare word; anything with a folder or a .py suffix is a path."""
    return not seed.endswith(".py") and "/" not in seed and "\\" not in seed


def resolve(seed: str, config_dir: Path | None = None) -> Path:
    """The program file for one ``search.seeds`` entry: a library name, or a path (absolute; else relative to
    the config file's folder, then to the working directory). Raises ``UnknownSeed`` or ``FileNotFoundError``."""
    if is_name(seed):
        return entry(seed).path
    path = Path(seed).expanduser()
    places = [path] if path.is_absolute() else [*([config_dir / path] if config_dir else []), Path.cwd() / path]
    for place in places:
        if place.is_file():
            return place.resolve()
    raise MissingInput(f"seed file {seed} not found (looked at: {', '.join(str(p) for p in places)})")


def canonical(seed: str) -> str:
    """The library name for ``seeds/NAME.py``, the path by which configs written before the library named the
    paper's seeds (the same programs, byte for byte); any other entry unchanged. Lets such a run resume."""
    match = re.fullmatch(r"(?:\./)?seeds/(\w+)\.py", seed)
    return match.group(1) if match and match.group(1) in PAPER_SEEDS else seed
