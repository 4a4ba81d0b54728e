"""LoCoMo (Maharana et al., 2024) conversations as tasks.

The data file (``locomo10.json``, CC BY-NC 4.0) is never shipped with the project; :func:`find_locomo_file`
locates a local copy. One LoCoMo sample (one long two-person conversation) becomes one :class:`Task`: each
session (or, as an option, each dialogue turn) is a :class:`RawText` and each QA item a :class:`Item`
whose evidence names dialogue turns.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from mstar_ray.exit_codes import InputError, MissingInput
from mstar_ray.families.qa.dialogue import Granularity, dialogue_texts, granularity_suffix
from mstar_ray.tasks.model import Item, RawText, Task, limit_items

if TYPE_CHECKING:
    from mstar_ray.families.task_options import LocomoOptions

logger = logging.getLogger(__name__)

ENV_VAR = "MSTAR_LOCOMO_PATH"
FILE_NAME = "locomo10.json"
CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
# Category 5 (adversarial) is left out by default, as in the M* paper: its gold answers are not answers.
DEFAULT_CATEGORIES: tuple[int, ...] = (1, 2, 3, 4)

_DOWNLOAD_HINT = (
    "To get it, download data/locomo10.json from the snap-research/locomo GitHub repository "
    "(https://github.com/snap-research/locomo; licence CC BY-NC 4.0, non-commercial use only, never commit it), "
    "then either put it at {cache} or set {env}=/path/to/locomo10.json."
)
_SESSION_KEY = re.compile(r"session_(\d+)")
# Tolerates the stray colon seen in the data ("D:11:26") and any case / leading zeros.
_EVIDENCE_ID = re.compile(r"[Dd]:?(\d+):(\d+)")
_EVIDENCE_SEPARATORS = re.compile(r"[;,\s]+")


class DataNotFoundError(MissingInput):
    """The LoCoMo file is in none of the searched places; ``searched`` lists them in search order."""

    def __init__(self, message: str, searched: list[str]) -> None:
        super().__init__(message)
        self.searched = searched


class LocomoLoadReport(BaseModel):
    """What loading one conversation had to repair or drop, so data quirks are visible rather than silent."""

    sample_id: str
    sessions: int
    turns: int
    questions_by_category: dict[str, int]
    skipped_without_answer: int = 0
    non_string_answers: int = 0
    questions_without_evidence: int = 0
    evidence_repaired: list[str] = []
    evidence_dropped_malformed: list[str] = []
    evidence_dropped_missing: list[str] = []


# ---------------------------------------------------------------------------------------------------------
# Locating the file


def _cache_path() -> Path:
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "mstar-ray" / FILE_NAME


def _project_path() -> Path:
    # mstar_ray/families/qa/locomo.py -> parents[3] is the repository root, parents[4] the directory that holds it
    # next to the shared data directory (…/main/mstar_ray/families/qa -> …/shared/data).
    return Path(__file__).resolve().parents[4] / "shared" / "data" / FILE_NAME


def find_locomo_file(path: str | Path | None = None) -> Path:
    """Return the first existing LoCoMo file among: ``path``, ``$MSTAR_LOCOMO_PATH``, the per-user cache
    (``$XDG_CACHE_HOME`` or ``~/.cache``, then ``mstar-ray/locomo10.json``), and ``../shared/data`` next to the
    repository. Raises :class:`DataNotFoundError` naming every place looked at."""
    env_value = os.environ.get(ENV_VAR) or None
    candidates: list[tuple[str, Path | None]] = [
        ("explicit path (config)", Path(path).expanduser() if path is not None and str(path) else None),
        (f"${ENV_VAR}", Path(env_value).expanduser() if env_value else None),
        ("per-user cache", _cache_path()),
        ("project data directory", _project_path()),
    ]
    searched: list[str] = []
    for index, (label, candidate) in enumerate(candidates, start=1):
        if candidate is None:
            searched.append(f"{index}. {label}: {'not set' if index == 2 else 'not given'}")
            continue
        if candidate.is_file():
            return candidate
        reason = "is not a file" if candidate.exists() else "does not exist"
        searched.append(f"{index}. {label}: {candidate} ({reason})")
        if index == 1:
            # A path the user named that falls through would silently load other data than asked for.
            raise DataNotFoundError(
                f"LoCoMo data file given explicitly not found: {candidate} ({reason}).\n"
                + _DOWNLOAD_HINT.format(cache=_cache_path(), env=ENV_VAR),
                searched,
            )
    message = (
        f"LoCoMo data file {FILE_NAME} not found. Looked in, in order:\n  "
        + "\n  ".join(searched)
        + "\n"
        + _DOWNLOAD_HINT.format(cache=_cache_path(), env=ENV_VAR)
    )
    raise DataNotFoundError(message, searched)


# ---------------------------------------------------------------------------------------------------------
# Reading and validating


class _RawTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    speaker: str
    dia_id: str
    text: str
    blip_caption: str | None = None


class _RawQA(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question: str
    answer: str | int | float | None = None
    adversarial_answer: str | int | float | None = None
    evidence: list[str] | str = []
    category: int


class _RawSample(BaseModel):
    model_config = ConfigDict(extra="ignore")

    sample_id: str
    conversation: dict[str, Any]
    qa: list[_RawQA]


@lru_cache(maxsize=4)
def _read_json(path: str, mtime_ns: int, size: int) -> list[Any]:
    # Keyed on mtime and size so an edited file is re-read; the 1.7 MB parse is otherwise repeated per load.
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except json.JSONDecodeError as err:
        raise InputError(f"{path} is not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})") from err
    except UnicodeDecodeError as err:
        raise InputError(f"{path} is not UTF-8 text, so it cannot be the LoCoMo JSON file: {err}") from err
    if not isinstance(data, list):
        raise InputError(
            f"{path} does not look like LoCoMo data: expected a JSON list of samples at the top level, "
            f"found {type(data).__name__}"
        )
    return data


def _load_samples(path: str | Path | None) -> tuple[Path, list[Any]]:
    file = find_locomo_file(path)
    stat = file.stat()
    return file, _read_json(str(file), stat.st_mtime_ns, stat.st_size)


def _describe(err: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in err.errors()[:3]]
    more = err.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more problems)" if more > 0 else "")


def _parse_sample(file: Path, index: int, raw: Any) -> _RawSample:
    try:
        return _RawSample.model_validate(raw)
    except ValidationError as err:
        raise InputError(f"{file}: sample {index} does not have the LoCoMo structure: {_describe(err)}") from err


# ---------------------------------------------------------------------------------------------------------
# Building the task


def _turn_line(turn: _RawTurn) -> str:
    line = f"{turn.speaker}: {turn.text}"
    if turn.blip_caption:
        # The caption is the only trace of a shared photo that a text-only agent can see, and some
        # questions are about what was in it.
        line += f" [shares an image: {turn.blip_caption}]"
    return line


def _texts(file: Path, sample: _RawSample, granularity: Granularity) -> tuple[list[RawText], int, list[str]]:
    """(raw texts, number of sessions, every turn id in order)."""
    conversation = sample.conversation
    sessions: list[tuple[int, str]] = []
    for key, value in conversation.items():
        match = _SESSION_KEY.fullmatch(key)
        # The file also carries date keys for sessions that have no turns (e.g. session_20_date_time .. 35).
        if match is None:
            continue
        if not isinstance(value, list):
            raise InputError(
                f"{file}: {sample.sample_id}: {key} should be a list of turns, found {type(value).__name__}"
            )
        sessions.append((int(match.group(1)), key))
    sessions.sort()  # numerically, so session_10 follows session_9

    texts: list[RawText] = []
    seen: list[str] = []
    seen_set: set[str] = set()
    for number, key in sessions:
        date_time = conversation.get(f"{key}_date_time")
        if not isinstance(date_time, str) or not date_time.strip():
            raise InputError(f"{file}: {sample.sample_id}: {key} has turns but no {key}_date_time string")
        turns: list[tuple[str, str]] = []
        for position, raw_turn in enumerate(conversation[key]):
            try:
                turn = _RawTurn.model_validate(raw_turn)
            except ValidationError as err:
                raise InputError(f"{file}: {sample.sample_id}: {key} turn {position}: {_describe(err)}") from err
            if turn.dia_id in seen_set:
                raise InputError(f"{file}: {sample.sample_id}: dialogue id {turn.dia_id} occurs twice")
            seen.append(turn.dia_id)
            seen_set.add(turn.dia_id)
            turns.append((turn.dia_id, _turn_line(turn)))
        texts += dialogue_texts(number, date_time.strip(), turns, granularity)
    return texts, len(sessions), seen


def _normalise_evidence(raw: list[str] | str, known: set[str], report: LocomoLoadReport, where: str) -> list[str]:
    pieces = [raw] if isinstance(raw, str) else raw
    result: list[str] = []
    for piece in pieces:
        ids_here: list[str] = []
        # One entry sometimes holds several ids ("D8:6; D9:17").
        for token in _EVIDENCE_SEPARATORS.split(piece.strip()):
            if not token:
                continue
            match = _EVIDENCE_ID.fullmatch(token)
            if match is None:
                logger.debug("%s: dropping malformed evidence id %r", where, token)
                report.evidence_dropped_malformed.append(token)
                continue
            ids_here.append(f"D{int(match.group(1))}:{int(match.group(2))}")
        if ids_here and ids_here != [piece]:
            report.evidence_repaired.append(f"{piece} -> {', '.join(ids_here)}")
        for dia_id in ids_here:
            if dia_id not in known:
                logger.debug("%s: dropping evidence id %s, which names no turn", where, dia_id)
                report.evidence_dropped_missing.append(dia_id)
            elif dia_id not in result:
                result.append(dia_id)
    return result


def _questions(
    sample: _RawSample, categories: tuple[int, ...], known: set[str], report: LocomoLoadReport
) -> list[Item]:
    questions: list[Item] = []
    for index, qa in enumerate(sample.qa):
        if qa.category not in categories:
            continue
        where = f"{sample.sample_id}/q{index}"
        # Adversarial items usually carry only adversarial_answer. Beware: that is the answer the question's
        # misattribution lures towards (it is true of the *other* speaker), not a correct one; the right reply
        # is that the conversation does not say. A present ``answer`` wins.
        answer = qa.answer if qa.answer is not None else qa.adversarial_answer
        if answer is None or (isinstance(answer, str) and not answer.strip()):
            logger.debug("%s: skipped, it has no answer", where)
            report.skipped_without_answer += 1
            continue
        if not isinstance(answer, str):
            report.non_string_answers += 1  # e.g. a bare year 2022 or a count 3
        evidence = _normalise_evidence(qa.evidence, known, report, where)
        if not evidence:
            report.questions_without_evidence += 1
        category = CATEGORY_NAMES[qa.category]
        report.questions_by_category[category] = report.questions_by_category.get(category, 0) + 1
        questions.append(
            Item(id=where, question=qa.question, answer=str(answer), category=category, evidence=evidence)
        )
    return questions


def _check_categories(categories: Iterable[int]) -> tuple[int, ...]:
    chosen = tuple(categories)
    bad = [c for c in chosen if isinstance(c, bool) or c not in CATEGORY_NAMES]
    if bad or not chosen:
        valid = ", ".join(f"{k} ({v})" for k, v in CATEGORY_NAMES.items())
        raise InputError(f"categories must be a non-empty selection of {valid}; got {chosen!r}")
    return chosen


def _build(
    path: str | Path | None, conversation: int, categories: Iterable[int], limit: int | None,
    granularity: Granularity = "session",
) -> Task:
    chosen = _check_categories(categories)
    file, samples = _load_samples(path)
    if isinstance(conversation, bool) or not isinstance(conversation, int) or not 0 <= conversation < len(samples):
        valid = f"0..{len(samples) - 1}" if samples else "none, the file holds no conversations"
        raise InputError(
            f"conversation {conversation!r} is out of range: {file} holds {len(samples)} conversations "
            f"(valid indices: {valid})"
        )
    sample = _parse_sample(file, conversation, samples[conversation])
    texts, session_count, turn_ids = _texts(file, sample, granularity)
    report = LocomoLoadReport(
        sample_id=sample.sample_id, sessions=session_count, turns=len(turn_ids), questions_by_category={}
    )
    questions = _questions(sample, chosen, set(turn_ids), report)
    logger.debug("loaded %s from %s: %s", sample.sample_id, file, report.model_dump())
    return Task(name=f"locomo/{sample.sample_id}{granularity_suffix(granularity)}", texts=texts,
                items=limit_items(questions, limit))


def load_locomo(
    path: str | Path | None = None,
    conversation: int = 0,
    categories: Iterable[int] = DEFAULT_CATEGORIES,
    limit: int | None = None,
    granularity: Granularity = "session",
) -> Task:
    """Load one LoCoMo conversation (0-based index into the file) as a task named ``locomo/<sample_id>``.

    ``granularity`` "session" (the default, as the M* paper) makes each session one raw text (id ``S<n>``,
    the session's date on its first line, then one turn per line); "turn" makes each dialogue turn one
    (id ``D<session>:<turn>``, text ``[date] speaker: words``). Question evidence names turns either way
    (``Task.evidence()`` says which text holds each). Question ids are ``<sample_id>/q<i>`` with ``i`` the
    item's position in the file's QA list, so ids stay the same whatever categories or limit are chosen.
    ``limit`` keeps at most that many questions, round-robin across categories.
    """
    return _build(path, conversation, categories, limit, granularity)


def from_config(config: LocomoOptions) -> Task:
    categories = DEFAULT_CATEGORIES if config.categories is None else config.categories
    return load_locomo(config.data, conversation=config.conversation, categories=categories, limit=config.limit,
                       granularity=config.granularity)
