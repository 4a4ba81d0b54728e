"""``reflect``: the offline reflector chooses where and what to change from what an LLM reflector reads.

An LLM reflector is shown the parent, its failures (question, expected and given answer, the query, the
context read() returned, the stage the failure is attributed to), its lineage and which of its children
already failed. This reads the same and turns it into a choice among the generic edits of this package:

- the stages the parent's failures are attributed to (all of them, ``stage_counts``; else the cases' own; a
  case without a stage counts as ``answering`` when its expected answer stands in its context, else
  ``retrieval``) weigh the edits addressing each (``PLAYBOOK``): storage -> what write() keeps and how it is
  keyed (dates on every line, one entry per line, its sizes, filters, a SQLite table of date and speaker);
  retrieval -> how read() finds and ranks (keyword fusion, more entries, a second read for the person a two-hop
  question names by a relation, a cap per source, recency, the dated lines of the person a query names);
  answering -> read() handing the answer step evidence instead of answering itself, instructions and the
  context's layout (long lines out, more room);
- cues in the cases add to that: a question about when, whose context holds no date of the answer, asks for
  dated items; a question about now asks for recency; a question naming someone by a relation ("the person
  who adopted Bramble") asks for a second read; a question about when or about now that names a person whose
  context holds no dated line of theirs asks for a table of date and speaker; a context that is a bare answer
  asks for evidence instead;
- a program of another line that gained over an ancestor of the parent (``request.relatives``) offers its change
  to be merged into the parent (``merge_relative``), weighed above any one stage's first edit: the two gains were
  found apart, and a program with both is two edits from their common ancestor;
- a change whose description matches a child of this parent that scored no better (or never was scored) is
  never proposed again: lineage;
- the parts of the parent that a child changed without moving its score at all, and those that children
  across the run changed without ever moving a score (``request.inert_parts``: a prompt the task agent does
  not read, an order nothing reads in order) are where the failures do not come from:
  an edit that touches only those is taken only when no other applies;
- an edit that only filters read()'s text (long lines out, a cap per source) is first tried on the contexts
  the failures were read with: one that would change none of them cannot be where they come from, and is
  likewise taken only when no other applies.

The edits are those the paper reports its evolved programs made (hybrid keyword and vector retrieval, at
most k chunks per session, date-aware items, a table of date and speaker beside the vectors), each generic
over the contract: nothing here knows a seed or a dataset. ``propose`` (the blind random proposer) stays for
the ``offline-random`` ablation.
"""

from __future__ import annotations

import ast
import random
import re
from collections import Counter
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from mstar_ray import text as tx
from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.program_ast import changed_pieces
from mstar_ray.reflect.offline.dates import date_aware_writes, write_per_line
from mstar_ray.reflect.offline.engine import (
    WHY, Mutation, NoMutation, _methods, _module_class, _weighted_shuffle, what_changed,
)
from mstar_ray.families.qa.offline import short_reply
from mstar_ray.reflect.offline.evidence import quote_evidence
from mstar_ray.reflect.offline.hops import second_read
from mstar_ray.reflect.offline.instructions import edit_instruction
from mstar_ray.reflect.offline.lines import drop_long_lines, drops_from
from mstar_ray.reflect.offline.perturb import _read_caps, perturb_numbers
from mstar_ray.reflect.offline.relatives import merge_relative
from mstar_ray.reflect.offline.propose import _crossover_any
from mstar_ray.reflect.offline.ranking import cap_per_source, caps_in, fuse_keyword_scores
from mstar_ray.reflect.offline.table import speaker_date_table
from mstar_ray.reflect.offline.writes import filter_writes, order_by_recency
from mstar_ray.reflect.request import inert_parts

if TYPE_CHECKING:
    from mstar_ray.reflect.request import Case, LineageEntry, Relative

# For each stage a failure is attributed to, the edits that address it, the likeliest first.
PLAYBOOK: dict[str, tuple[str, ...]] = {
    "storage": ("date_aware_writes", "write_per_line", "tune_write", "filter_writes", "speaker_date_table",
                "crossover"),
    "retrieval": ("fuse_keyword_scores", "widen_read", "second_read", "cap_per_source", "order_by_recency",
                  "speaker_date_table", "drop_long_lines", "crossover"),
    "answering": ("quote_evidence", "edit_instruction", "drop_long_lines", "widen_context", "crossover"),
}
INSTRUCTION_KINDS = frozenset({"edit_instruction"})
# The edits that only filter read()'s text, each with whether its filter changes one of the contexts given.
FILTERS: dict[str, Callable[[Sequence[str]], bool]] = {"drop_long_lines": drops_from, "cap_per_source": caps_in}
DECAY = 0.6  # each later edit of a stage's list weighs this much of the one before it
FLOOR = 0.05  # every edit stays possible: the attribution is a sample, and the search must not get stuck
CUE_WEIGHT = 0.8  # of a cue that every case shows
MERGE_WEIGHT = 1.2  # of merging a relative's gain: above a stage's first edit (at most 1 + FLOOR) when one is offered
TRIES_PER_KIND = 4  # draws of a kind with random choices (which number, which sentence) before the next kind
_NOW = re.compile(r"\b(now|current|currently|still|latest|these days|anymore)\b", re.IGNORECASE)
# A question that names someone by a relation needs a second read for who that is.
_RELATION = re.compile(r"\bthe (?:person|one|owner|man|woman) (?:who|whose|that|of)\b", re.IGNORECASE)


def _why_free(message: str) -> str:
    """What lineage compares: the change, not why it was chosen."""
    return what_changed(message).lower()


def failed_changes(lineage: Sequence[LineageEntry]) -> set[str]:
    """What children of this parent changed and did not gain by (scored no higher, or were never scored)."""
    return {_why_free(e.commit_message) for e in lineage
            if e.relation == "child" and e.id != "-" and (e.delta is None or e.delta <= 0)}


def _stage_of(case: Case) -> str:
    if case.stage:
        return case.stage
    expected = tx.content_stems(case.expected)
    held = set(tx.content_stems(case.context))
    return "answering" if expected and all(stem in held for stem in expected) else "retrieval"


def stage_shares(failures: Sequence[Case], stage_counts: dict[str, int]) -> dict[str, float]:
    """Each stage's share of the parent's failures (the split's own ``not_written`` left out)."""
    counts = Counter({s: n for s, n in stage_counts.items() if s in PLAYBOOK and n > 0})
    if not counts:
        counts = Counter(s for s in map(_stage_of, failures) if s in PLAYBOOK)
    total = sum(counts.values())
    return {s: n / total for s, n in counts.items()} if total else {}


def _asks_when(case: Case) -> bool:
    words = " ".join(tx.tokenize(case.question))
    return words.startswith("when ") or bool(re.search(r"\b(what|which) (year|month|date|day)\b", words))


def _lacks_dated_lines_of(case: Case) -> bool:
    """Whether the question names a person and its context holds no dated line that person says (a line is
    dated by its own [date] header or by the header above it)."""
    named = {n.text for n in tx.find_names(case.question) if n.text.lower() not in tx.QUESTION_WORDS}
    if not named:
        return False
    dated: set[str] = set()
    header = False
    for line in case.context.split("\n"):
        if not line.strip():
            header = False  # a new entry: a chunk cut from mid-session is not under the header above it
        turn = tx.parse_turn(line)
        if turn.header:
            header = turn.date is not None
        if turn.speaker and (turn.date is not None or header):
            dated.add(turn.speaker)
    return not named & dated


def cues(failures: Sequence[Case]) -> Counter[str]:
    """Edits the failures' own words point to, with the share of cases that point there."""
    found: Counter[str] = Counter()
    for case in failures:
        if _asks_when(case) and not tx.find_dates(case.context):
            found["date_aware_writes"] += 1  # a date was asked for and the context holds none
        if _NOW.search(case.question):
            found["order_by_recency"] += 1
        if _RELATION.search(case.question):
            found["second_read"] += 1
        if (_asks_when(case) or _NOW.search(case.question)) and _lacks_dated_lines_of(case):
            found["speaker_date_table"] += 1  # a person's dated statements were asked for, none was read
        if case.context.strip() and short_reply(case.context) is not None:
            found["quote_evidence"] += 1  # read() returned an answer, not evidence the answer step could use
    return Counter({k: n / len(failures) for k, n in found.items()}) if failures else found


def weigh(failures: Sequence[Case], stage_counts: dict[str, int]) -> dict[str, float]:
    """Every edit's weight: its place in the list of each stage, by that stage's share, plus the cues."""
    shares = stage_shares(failures, stage_counts) or {stage: 1 / len(PLAYBOOK) for stage in PLAYBOOK}
    weights: defaultdict[str, float] = defaultdict(float, {kind: FLOOR for edits in PLAYBOOK.values() for kind in edits})
    for stage, share in shares.items():
        for place, kind in enumerate(PLAYBOOK[stage]):
            weights[kind] += share * DECAY ** place
    for kind, share in cues(failures).items():
        weights[kind] += CUE_WEIGHT * share
    return dict(weights)


def _names_used(tree: ast.Module, method: str) -> set[str]:
    """The method's label and the module constants and helper functions it (or a helper it calls) uses."""
    cls = _module_class(tree, LOGIC_CLASS)
    fn = _methods(cls).get(method) if cls else None
    helpers = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    used, todo, seen = {f"{method}()"}, [fn] if fn else [], set()
    while todo:
        node = todo.pop()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and sub.id not in seen:
                seen.add(sub.id)
                used.add(sub.id)
                if sub.id in helpers:
                    used.add(f"{sub.id}()")
                    todo.append(helpers[sub.id])
    return used


def editors(parent: str, population: Sequence[str], known: frozenset[str],
            relatives: Sequence[Relative] = ()) -> dict[str, Callable[[random.Random], Mutation]]:
    tree = ast.parse(parent)
    write, read = _names_used(tree, "write"), _names_used(tree, "read")
    caps = _read_caps(tree).names
    edits: dict[str, Callable[[random.Random], Mutation]] = {
        "date_aware_writes": lambda rng: date_aware_writes(parent, rng, avoid=known),
        "write_per_line": lambda rng: write_per_line(parent, rng, avoid=known),
        "tune_write": lambda rng: perturb_numbers(parent, rng, avoid=known, within=write - read),
        "filter_writes": lambda rng: filter_writes(parent, rng, avoid=known),
        "fuse_keyword_scores": lambda rng: fuse_keyword_scores(parent, rng, avoid=known),
        "widen_read": lambda rng: perturb_numbers(parent, rng, avoid=known, within=read - caps, direction="raise"),
        "cap_per_source": lambda rng: cap_per_source(parent, rng, avoid=known),
        "second_read": lambda rng: second_read(parent, rng, avoid=known),
        "speaker_date_table": lambda rng: speaker_date_table(parent, rng, avoid=known),
        "quote_evidence": lambda rng: quote_evidence(parent, rng, avoid=known),
        "order_by_recency": lambda rng: order_by_recency(parent, rng, avoid=known),
        "drop_long_lines": lambda rng: drop_long_lines(parent, rng, avoid=known),
        "edit_instruction": lambda rng: edit_instruction(parent, rng, avoid=known),
        "widen_context": lambda rng: perturb_numbers(parent, rng, avoid=known, within=caps | {"read()"}, direction="raise"),
        "crossover": lambda rng: _crossover_any(parent, population, rng, known),
    }
    edits["merge_relative"] = lambda rng: merge_relative(parent, relatives, rng, avoid=known, replay=edits.get)
    return edits


def _why(kind: str, shares: dict[str, float], cue: Counter[str]) -> str:
    if kind == "merge_relative":
        return "another line gained by it"
    stages = [s for s, edits in PLAYBOOK.items() if kind in edits and s in shares]
    parts = [f"{round(100 * shares[s])}% of failures at {s}" for s in sorted(stages, key=lambda s: -shares[s])]
    if cue.get(kind):
        parts.append({"date_aware_writes": "'when' questions read contexts without a date",
                      "order_by_recency": "questions ask what holds now",
                      "second_read": "questions name someone by a relation",
                      "speaker_date_table": "'when'/'now' questions about a person read no dated line of theirs",
                      "quote_evidence": "read() returned a bare answer, no evidence"}[kind])
    return "; ".join(parts) or "no failure points elsewhere"


def reflect(
    parent_source: str,
    population_sources: list[str],
    rng: random.Random,
    *,
    failures: Sequence[Case] = (),
    stage_counts: dict[str, int] | None = None,
    lineage: Sequence[LineageEntry] = (),
    relatives: Sequence[Relative] = (),
    run_inert: Collection[str] = (),
    exclude: Collection[str] = (),
    frozen_code: bool = False,
    frozen_instructions: bool = False,
) -> Mutation:
    """One child of ``parent_source``, the edit chosen from its failures and lineage (see the module).

    Edits are drawn by weight (so that reflections in flight on one parent try different edits), and one
    that does not apply, or repeats a failed change of this parent (``lineage``) or a description in
    ``exclude``, gives way to the next; one touching only parts that children changed without effect, of this
    parent or across the run (``run_inert``), waits until nothing else applies. The returned description ends with why it was chosen (``WHY``).
    ``NoMutation`` if nothing applies.
    """
    stage_counts = stage_counts or {}
    weights = weigh(failures, stage_counts)
    if relatives:
        weights["merge_relative"] = MERGE_WEIGHT
    allowed = [k for k in weights if not (frozen_code and k not in INSTRUCTION_KINDS)
               and not (frozen_instructions and k in INSTRUCTION_KINDS)]
    failed = failed_changes(lineage) | {_why_free(d) for d in exclude}
    known = frozenset(population_sources)
    edits = editors(parent_source, population_sources, known, relatives)
    shares, cue = stage_shares(failures, stage_counts), cues(failures)
    inert = inert_parts(lineage) | set(run_inert)

    def explained(kind: str, mutation: Mutation) -> Mutation:
        return replace(mutation, description=f"{mutation.description}{WHY}{_why(kind, shares, cue)})")

    skipped: list[str] = []
    deferred: list[tuple[str, Mutation]] = []
    for kind in _weighted_shuffle(allowed, [weights[k] ** 2 for k in allowed], rng):
        for _ in range(TRIES_PER_KIND):
            try:
                mutation = edits[kind](rng)
            except NoMutation:
                break
            if _why_free(mutation.description) in failed:
                skipped.append(mutation.description)
                continue
            if inert and set(changed_pieces(parent_source, mutation.source)) <= inert:
                # A child changed these parts and the score did not move: the failures come from elsewhere.
                deferred.append((kind, mutation))
                break
            if failures and kind in FILTERS and not FILTERS[kind]([case.context for case in failures]):
                deferred.append((kind, mutation))
                break
            return explained(kind, mutation)
    if deferred:
        return explained(*deferred[0])
    tried = f"; every applicable change already failed on this parent ({len(skipped)} skipped)" if skipped else ""
    raise NoMutation(f"no edit applies (allowed: {', '.join(allowed) or 'none'}){tried}")
