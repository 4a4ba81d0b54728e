"""The four run-log tables: an Arrow schema each (what is on disk) and a pydantic row model each (the typed
boundary the driver writes through and ``read_rows`` returns).

Every schema carries ``mstar_ray.schema_version`` and ``mstar_ray.table`` in its metadata, so a log says
what it is without its file name, and a reader can refuse a log written by a newer version instead of
misreading it. Bump ``SCHEMA_VERSION`` on any change to a schema.

``candidates.category_scores`` is an Arrow ``map<string, float64>``, not a JSON string: DuckDB reads it as
a native ``MAP(VARCHAR, DOUBLE)`` (``category_scores['multi-hop']`` is a DOUBLE, no JSON functions),
pandas gets ``[(category, score), ...]`` per row, or dicts with ``to_pandas(maps_as_pydicts="strict")``,
and the scores stay float64 instead of text to re-parse; the categories differ per task, which rules out
a struct. ``results.query`` stays JSON text because a query's shape is the candidate program's own
dataclass, which differs between candidates of one run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

import pyarrow as pa
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeInt, field_validator

from mstar_ray.llm.usage import CallLog

# 2: candidates gained tolerances, structural_key, duplicate_of and the novelties
# 3: candidates gained texts_written, static_evidence, the static score's interval and the selection verdict;
#    results gained the split "confirmation"; llm_calls gained
#    parent (the program a reflector call reflected on; candidate is the child it gave)
# 4: candidates gained the status "failed" (an evaluation that broke down, not the program)
# 5: events gained typed fields: work and purpose (what started or finished), and the search transition the row
#    records with its data (mstar_ray.state.transitions), which a resume replays instead of parsing detail;
#    the kind "duplicate"; detail is for people only
# 6: results rows are items of any task family (mstar_ray.families) and gained trace: what happened beyond the
#    answer (an episode's steps, a rubric's verdicts), which the reflector reads
# 7: results gained stage and missing_evidence (mstar_ray.agent.attribution: where a failure went wrong);
#    candidates gained stage_counts (attributed failures by category, then stage)
# 8: candidates gained metric: what the scores are (the family's metric, naming a stand-in grader when one scored)
# 9: events gained the work "replica": a replica of a model the run serves (mstar_ray.serve) started, healthy
#    (kind started), stopped serving mid-run (failed) or was shut down at the end (finished), its record
#    (app, replica, node, pid, state, start-up time; serve.replicas.ReplicaRecord) as data;
#    llm_calls gained served_by (the replica that answered the call)
# 10: cascade evaluation (search.cascade): candidates gained the status "screened_out", screen_score (the mean over
#    the slice) and screen_threshold (what it needed); results gained the split "screen"; the events of
#    evaluations the purpose "screen" and the transition Screened
SCHEMA_VERSION = 10
VERSION_KEY = b"mstar_ray.schema_version"
TABLE_KEY = b"mstar_ray.table"

Int32 = Annotated[int, Field(ge=0, le=2**31 - 1)]
Origin = Annotated[str, Field(pattern=r"^(seed|reflection|runtime-fix|mutation:[A-Za-z0-9_.-]+)$")]
TIMESTAMP = pa.timestamp("us", tz="UTC")


def _now() -> datetime:
    return datetime.now(UTC)


class Row(BaseModel):
    """A row of one table; ``to_record()`` is the dict ``pyarrow.RecordBatch.from_pylist`` takes."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    table: ClassVar[str]

    def to_record(self) -> dict[str, Any]:
        return self.model_dump()


class CandidateRow(Row):
    table: ClassVar[str] = "candidates"

    id: str
    parent: str | None = None
    origin: Origin
    commit_message: str = ""
    patch: str | None = None
    edit_format: str | None = None
    tolerances: list[str] = Field(default_factory=list)  # fixes a tolerant reading of the reflector's reply made
    # failed: its evaluation broke down (an evaluator error or crash), not its program; violation_message says how;
    # screened_out: the cascade stopped it after the slice (static_score stays empty: it had no full evaluation)
    status: Literal["evaluated", "violation", "discarded", "duplicate", "failed", "screened_out"]
    iteration: Int32
    static_score: float | None = None
    rotating_score: float | None = None  # test scores live in ``results`` (split "test") and summary.json
    judge_score: float | None = None
    metric: str | None = None  # what the scores are (EvalReport.metric): a stand-in grader names itself here
    category_scores: dict[str, float] = Field(default_factory=dict)
    violation_kind: str | None = None
    violation_message: str | None = None
    wall_seconds: float = 0.0
    prompt_tokens: NonNegativeInt = 0
    completion_tokens: NonNegativeInt = 0
    cost_usd: float = 0.0
    cache_hits: NonNegativeInt = 0
    requests: NonNegativeInt = 0
    worker_pid: Int32 = 0
    node_id: str = ""
    fix_round: Int32 = 0
    write_example: str | None = None  # JSON: the first item stored and its raw text, for reflection prompts
    structural_key: str | None = None  # equal for programs that differ only in layout, comments, docstrings
    duplicate_of: str | None = None  # status "duplicate": the program it repeats (whose scores it carries)
    novelty_parent: float | None = None  # normalised tree edit distance to the parent
    novelty_population: float | None = None  # ... to the nearest program known (queued) before it
    texts_written: list[str] = Field(default_factory=list)  # the text ids written for this evaluation, in order
    static_evidence: float | None = None  # share of the static questions' evidence units in those texts
    static_low: float | None = None  # bootstrap interval of static_score over the static questions
    static_high: float | None = None
    incumbent: str | None = None  # the program the run would have returned when this one was scored
    lead_low: float | None = None  # paired bootstrap interval of (this static score - the incumbent's)
    lead_high: float | None = None
    verdict: Literal["replaces", "contender", "kept"] | None = None  # mstar_ray.search.selection
    # attributed failures on the static and rotating items: category -> stage -> count (none: not attributed)
    stage_counts: dict[str, dict[str, int]] = Field(default_factory=dict)
    screen_score: float | None = None  # the cascade's: mean over the slice of the static set
    screen_threshold: float | None = None  # the slice score it needed to go on (None: nothing to compare with)
    finished_at: AwareDatetime = Field(default_factory=_now)


class ResultRow(Row):
    table: ClassVar[str] = "results"

    candidate: str
    question_id: str
    split: Literal["screen", "static", "rotating", "confirmation", "test"]
    category: str
    question: str
    expected: str
    prediction: str
    score: float
    judge: float | None = None
    query: str = "{}"
    context: str = ""
    latency_s: float = 0.0
    error: str | None = None
    trace: str = ""  # what happened beyond the answer: an episode's steps, a rubric's verdicts
    stage: Literal["answering", "retrieval", "storage", "not_written"] | None = None  # where a failure went wrong
    missing_evidence: list[str] = Field(default_factory=list)  # evidence units that did not reach the context

    @field_validator("query")
    @classmethod
    def _query_is_json(cls, value: str) -> str:
        json.loads(value)  # a log that DuckDB's json functions cannot parse is no use later
        return value


class _LoggedAt(BaseModel):
    at: AwareDatetime = Field(default_factory=_now)


class LLMCallRow(Row, CallLog, _LoggedAt):
    """A request's record (``llm.usage.CallLog``) as ``llm_calls`` stores it: when it was logged and for which
    program. The bases' order puts ``at`` first and the record's fields next, as the Arrow schema has them."""

    table: ClassVar[str] = "llm_calls"

    retries: Int32 = 0
    candidate: str | None = None  # the program evaluated; for a reflector call, the child it gave (if any)
    parent: str | None = None  # reflector calls: the program reflected on


class EventRow(Row):
    table: ClassVar[str] = "events"

    at: AwareDatetime = Field(default_factory=_now)
    kind: Literal["submitted", "started", "finished", "failed", "retried", "resumed", "discarded", "duplicate",
                  "stopped"]
    candidate: str | None = None
    iteration: Int32 | None = None
    actor: str | None = None
    node_id: str | None = None
    detail: str | None = None  # for people: nothing reads it back
    # what started, finished or was retried; replica: a served model's replica (its record is the data)
    work: Literal["evaluation", "reflection", "selection", "replica"] | None = None
    # an evaluation's: search | confirm | test; a reflection's: improve | runtime_fix; a replica's: its model
    purpose: str | None = None
    transition: str | None = None  # the search transition this row records (its class name), if any
    data: str | None = None  # that transition as JSON, without what programs/ and the other logs hold; a replica's record

    @field_validator("data")
    @classmethod
    def _data_is_json(cls, value: str | None) -> str | None:
        if value is not None:
            json.loads(value)
        return value


def _schema(table: str, *fields: pa.Field) -> pa.Schema:
    return pa.schema(fields, metadata={VERSION_KEY: str(SCHEMA_VERSION).encode(), TABLE_KEY: table.encode()})


def _req(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=False)


def _opt(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=True)


SCHEMAS: dict[str, pa.Schema] = {
    "candidates": _schema(
        "candidates",
        _req("id", pa.string()),
        _opt("parent", pa.string()),
        _req("origin", pa.string()),
        _req("commit_message", pa.string()),
        _opt("patch", pa.string()),
        _opt("edit_format", pa.string()),
        _req("tolerances", pa.list_(pa.string())),
        _req("status", pa.string()),
        _req("iteration", pa.int32()),
        _opt("static_score", pa.float64()),
        _opt("rotating_score", pa.float64()),
        _opt("judge_score", pa.float64()),
        _opt("metric", pa.string()),
        _req("category_scores", pa.map_(pa.string(), pa.float64())),
        _opt("violation_kind", pa.string()),
        _opt("violation_message", pa.string()),
        _req("wall_seconds", pa.float64()),
        _req("prompt_tokens", pa.int64()),
        _req("completion_tokens", pa.int64()),
        _req("cost_usd", pa.float64()),
        _req("cache_hits", pa.int64()),
        _req("requests", pa.int64()),
        _req("worker_pid", pa.int32()),
        _req("node_id", pa.string()),
        _req("fix_round", pa.int32()),
        _opt("write_example", pa.string()),
        _opt("structural_key", pa.string()),
        _opt("duplicate_of", pa.string()),
        _opt("novelty_parent", pa.float64()),
        _opt("novelty_population", pa.float64()),
        _req("texts_written", pa.list_(pa.string())),
        _opt("static_evidence", pa.float64()),
        _opt("static_low", pa.float64()),
        _opt("static_high", pa.float64()),
        _opt("incumbent", pa.string()),
        _opt("lead_low", pa.float64()),
        _opt("lead_high", pa.float64()),
        _opt("verdict", pa.string()),
        _req("stage_counts", pa.map_(pa.string(), pa.map_(pa.string(), pa.int64()))),
        _opt("screen_score", pa.float64()),
        _opt("screen_threshold", pa.float64()),
        _req("finished_at", TIMESTAMP),
    ),
    "results": _schema(
        "results",
        _req("candidate", pa.string()),
        _req("question_id", pa.string()),
        _req("split", pa.string()),
        _req("category", pa.string()),
        _req("question", pa.string()),
        _req("expected", pa.string()),
        _req("prediction", pa.string()),
        _req("score", pa.float64()),
        _opt("judge", pa.float64()),
        _req("query", pa.string()),
        _req("context", pa.string()),
        _req("latency_s", pa.float64()),
        _opt("error", pa.string()),
        _req("trace", pa.string()),
        _opt("stage", pa.string()),
        _req("missing_evidence", pa.list_(pa.string())),
    ),
    "llm_calls": _schema(
        "llm_calls",
        _req("at", TIMESTAMP),
        _req("role", pa.string()),
        _req("model", pa.string()),
        _req("step", pa.string()),
        _req("prompt_tokens", pa.int64()),
        _req("completion_tokens", pa.int64()),
        _req("latency_s", pa.float64()),
        _req("cache_hit", pa.bool_()),
        _req("cost_usd", pa.float64()),
        _req("retries", pa.int32()),
        _opt("served_by", pa.string()),
        _opt("candidate", pa.string()),
        _opt("parent", pa.string()),
    ),
    "events": _schema(
        "events",
        _req("at", TIMESTAMP),
        _req("kind", pa.string()),
        _opt("candidate", pa.string()),
        _opt("iteration", pa.int32()),
        _opt("actor", pa.string()),
        _opt("node_id", pa.string()),
        _opt("detail", pa.string()),
        _opt("work", pa.string()),
        _opt("purpose", pa.string()),
        _opt("transition", pa.string()),
        _opt("data", pa.string()),
    ),
}

ROWS: dict[str, type[Row]] = {row.table: row for row in (CandidateRow, ResultRow, LLMCallRow, EventRow)}


def schema_for(table: str) -> pa.Schema:
    try:
        return SCHEMAS[table]
    except KeyError:
        raise ValueError(f"unknown run-log table {table!r}; the tables are {sorted(SCHEMAS)}") from None
