"""BEAM ("Beyond a Million Tokens", Tavakoli et al., 2025) conversations as tasks, from a directory the user
supplies. BEAM carries no licence, so nothing of it ships with the project or its tests.

The layout read is the one BEAM publishes: its repository's ``chats/`` folder, which is also what the
authors' ``download_dataset.py`` writes from the Hugging Face copy (``Mohammadta/BEAM``)::

    <root>/<size>/<conversation id>/chat.json
    <root>/<size>/<conversation id>/probing_questions/probing_questions.json

``size`` is 100K, 500K, 1M (or 10M). ``--data`` may name the root, a folder holding ``chats/``, one size
folder or one conversation folder. ``chat.json`` is a list of batches (``batch_number``, optional
``time_anchor``, ``turns``: a list of turns, each a list of messages with ``role``, ``id``, ``content`` and
sometimes ``time_anchor``). Each message becomes one raw text, ``[time anchor] role: content``, the anchor being
the latest one seen (the generator's ``->-> batch,turn`` markers are cut from the content).
``probing_questions.json`` maps each of the ten memory abilities to its questions; the reference answer is in
``answer``, ``ideal_answer``, ``ideal_response``, ``ideal_summary`` or ``expected_compliance`` depending on the
ability, the evidence in ``source_chat_ids`` (message ids). BEAM grades answers against rubrics with an LLM
judge; here, as for every task, the protocol scores token F1 against the reference answer (and the LLM judge
when one is configured).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from mstar_ray.exit_codes import InputError, MissingInput
from mstar_ray.tasks.model import Item, RawText, Task, limit_items
from mstar_ray.tasks.records import parse_record

if TYPE_CHECKING:
    from mstar_ray.families.task_options import BeamOptions

Size = Literal["100K", "500K", "1M", "10M"]
SIZES: tuple[str, ...] = get_args(Size)
ABILITIES = (
    "abstention",
    "contradiction_resolution",
    "event_ordering",
    "information_extraction",
    "instruction_following",
    "knowledge_update",
    "multi_session_reasoning",
    "preference_following",
    "summarization",
    "temporal_reasoning",
)
ANSWER_FIELDS = ("answer", "ideal_answer", "ideal_response", "ideal_summary", "expected_compliance")
CHAT_FILE = "chat.json"
QUESTIONS_FILE = Path("probing_questions") / "probing_questions.json"
_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: str
    id: int | str
    content: str
    time_anchor: str | None = None


class _Batch(BaseModel):
    model_config = ConfigDict(extra="ignore")

    batch_number: int | None = None
    time_anchor: str | None = None
    turns: list[list[Any]]


class _Probe(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question: str
    source_chat_ids: list[Any] | dict[str, Any] | None = None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from err
    except UnicodeDecodeError as err:
        raise InputError(f"{path} is not UTF-8 text: {err}") from err


# ---------------------------------------------------------------------------------------------------------
# Finding the conversation


def _is_conversation(folder: Path) -> bool:
    return (folder / CHAT_FILE).is_file()


def _conversations(folder: Path) -> list[Path]:
    """Conversation folders under a size folder, in numeric order of their ids (1, 2, ..., 10)."""
    found = [p for p in folder.iterdir() if p.is_dir() and _is_conversation(p)]
    return sorted(found, key=lambda p: (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name))


def find_conversation(data: str | Path, size: str = "100K", conversation: int = 0) -> Path:
    """The folder of conversation number ``conversation`` (0-based, in id order) of the given size."""
    if size not in SIZES:
        raise InputError(f"BEAM size {size!r} is not one of {', '.join(SIZES)}")
    root = Path(data).expanduser()
    if not root.is_dir():
        raise MissingInput(
            f"BEAM data directory not found: {root}. BEAM is not shipped with mstar-ray (it carries no licence): "
            "get the chats/ folder of github.com/mohammadtavakoli78/BEAM, or run its download_dataset.py, and "
            "point --data (task.data) at it"
        )
    if _is_conversation(root):
        return root
    candidates = (root / "chats" / size, root / size, root)
    conversations = next((found for c in candidates if c.is_dir() and (found := _conversations(c))), [])
    if not conversations:
        raise MissingInput(
            f"no BEAM conversation of size {size} under {root}: expected {root}/{size}/<id>/{CHAT_FILE} "
            f"(or {root}/chats/{size}/..., or a size or conversation folder)"
        )
    if isinstance(conversation, bool) or not isinstance(conversation, int) or not 0 <= conversation < len(conversations):
        ids = ", ".join(p.name for p in conversations[:20])
        raise InputError(
            f"conversation {conversation!r} is out of range: {conversations[0].parent} holds {len(conversations)} "
            f"conversations (valid indices 0..{len(conversations) - 1}; ids {ids})"
        )
    return conversations[conversation]


# ---------------------------------------------------------------------------------------------------------
# Reading it


def _texts(chat_file: Path) -> list[RawText]:
    raw = _read_json(chat_file)
    if not isinstance(raw, list):
        raise InputError(f"{chat_file}: expected a JSON list of batches, found {type(raw).__name__}")
    texts: list[RawText] = []
    seen: dict[str, int] = {}
    anchor = ""
    for b, raw_batch in enumerate(raw):
        batch = parse_record(_Batch, raw_batch, f"{chat_file}: batch {b}")
        anchor = (batch.time_anchor or anchor).strip()
        for t, turn in enumerate(batch.turns):
            for m, raw_message in enumerate(turn):
                message = parse_record(_Message, raw_message, f"{chat_file}: batch {b} turn {t} message {m}")
                anchor = (message.time_anchor or anchor).strip()
                content = _MARKER.sub("", message.content).strip()
                if not content:
                    continue
                # Message ids repeat in a few published chats: later copies get a suffix.
                base = f"m{message.id}"
                seen[base] = seen.get(base, 0) + 1
                text_id = base if seen[base] == 1 else f"{base}#{seen[base]}"
                header = f"[{anchor}] " if anchor else ""
                texts.append(RawText(id=text_id, text=f"{header}{message.role}: {content}"))
    if not texts:
        raise InputError(f"{chat_file}: the conversation holds no messages")
    return texts


def _evidence(ids: list[Any] | dict[str, Any] | None, known: set[str]) -> list[str]:
    flat: list[Any] = []
    for value in (ids.values() if isinstance(ids, dict) else ids or []):
        flat.extend(value if isinstance(value, list) else [value])
    return list(dict.fromkeys(f"m{v}" for v in flat if f"m{v}" in known))


def _questions(questions_file: Path, conversation_id: str, known: set[str]) -> list[Item]:
    raw = _read_json(questions_file)
    if not isinstance(raw, dict):
        raise InputError(f"{questions_file}: expected a JSON object of abilities, found {type(raw).__name__}")
    questions: list[Item] = []
    for ability, items in raw.items():
        if ability not in ABILITIES:
            raise InputError(f"{questions_file}: unknown ability {ability!r}; BEAM's ten are {', '.join(ABILITIES)}")
        if not isinstance(items, list):
            raise InputError(f"{questions_file}: {ability}: expected a list of questions, found {type(items).__name__}")
        for index, item in enumerate(items):
            where = f"{questions_file}: {ability}[{index}]"
            probe = parse_record(_Probe, item, where)
            answer = next((item[f] for f in ANSWER_FIELDS if isinstance(item.get(f), str) and item[f].strip()), None)
            if answer is None:
                raise InputError(f"{where}: no reference answer (one of the fields {', '.join(ANSWER_FIELDS)})")
            questions.append(Item(
                id=f"{conversation_id}/{ability}/{index}", question=probe.question, answer=answer.strip(),
                category=ability.replace("_", "-"), evidence=_evidence(probe.source_chat_ids, known),
            ))
    if not questions:
        raise InputError(f"{questions_file}: no probing questions")
    return questions


def load_beam(data: str | Path | None, *, size: str = "100K", conversation: int = 0, limit: int | None = None) -> Task:
    """One BEAM conversation as a task named ``beam/<size>/<id>``; question ids ``<id>/<ability>/<i>``."""
    if data is None:
        raise InputError("the beam task needs its data directory: --data DIR (task.data); BEAM is not shipped")
    folder = find_conversation(data, size, conversation)
    questions_file = folder / QUESTIONS_FILE
    if not questions_file.is_file():
        raise MissingInput(f"{folder}: no {QUESTIONS_FILE} beside {CHAT_FILE}")
    texts = _texts(folder / CHAT_FILE)
    questions = _questions(questions_file, folder.name, {t.id for t in texts})
    return Task(name=f"beam/{size}/{folder.name}", texts=texts, items=limit_items(questions, limit))


def from_config(config: BeamOptions) -> Task:
    return load_beam(config.data, size=config.size, conversation=config.conversation, limit=config.limit)
