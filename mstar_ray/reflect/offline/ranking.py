"""How ``read()`` ranks what it found: ``fuse_keyword_scores`` and ``cap_per_source``.

Both pass every value ``read()`` returns through a helper (inside the slice that caps it, so the cap then
fills in the new order), whatever the program retrieves with:

- ``fuse_keyword_scores``: hybrid retrieval, as the paper's evolved programs do (vector similarity fused with
  keyword matches): the entries read() returns, in its own order, are re-ranked by reciprocal-rank fusion with
  a second order, by the words each shares with the query; the count constants read() uses (``TOP_K``...) are
  tripled in the same change, so that the fusion has more than the first few to choose from;
- ``cap_per_source``: at most ``MAX_PER_SOURCE`` entries of one source (the ``[date]`` header an entry opens
  with), as the paper's programs keep at most k chunks per session: one long session no longer fills read()'s
  room, and a question whose evidence spans sessions sees each of them.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Collection, Sequence

from mstar_ray.contract import LOGIC_CLASS
from mstar_ray.reflect.offline.engine import (
    _Edit, Mutation, NoMutation, _Source, _apply, _bindings, _constant_target, _methods, _module_class, _valid,
)
from mstar_ray.reflect.offline.engine import _Function, changes_one
from mstar_ray.reflect.offline.engine import _constant_number
from mstar_ray.reflect.offline.lines import _returns, _wrapped
from mstar_ray.reflect.offline.writes import _constant_insertion

FUSE = "fuse_by_query"
TERMS = "query_terms"
FUSION_RANK_NAME = "FUSION_RANK"
# Reciprocal-rank fusion's constant: small, as the lists fused are short.
FUSION_RANK = 10
OVERFETCH = 3
# Names of the counts read() retrieves by (TOP_K, N_RESULTS, MAX_ITEMS, LIMIT...), not of a size in characters.
_COUNT_NAME = re.compile(r"(^|_)(K|TOP|N|RESULTS|ITEMS|ENTRIES|HITS|LIMIT|COUNT|CHUNKS|ROWS|FACTS)(_|$)")
_SIZE_NAME = re.compile(r"CHARS|CONTEXT|WORDS|TOKENS|LEN|SIZE")

ENTRIES = "read_entries"
CAP = "per_source"
MAX_PER_SOURCE_NAME = "MAX_PER_SOURCE"
MAX_PER_SOURCE = 4

_ENTRIES_SOURCE = f'''# The entries of read()'s text: a line, or a [date] header line with the lines under it (a session, a
# dated chunk), which must move together: a line moved away from its header would lose its date.
def {ENTRIES}(text):
    out, block = [], False
    for line in text.split("\\n"):
        if not line.strip():
            block = False
        elif block and not line.startswith("["):
            out[-1] = out[-1] + "\\n" + line
        else:
            out.append(line)
            block = line.startswith("[") and line.rstrip().endswith("]")
    return out
'''

_FUSE_SOURCE = f'''# Words of four letters or more (the question's content words), for the keyword half of the fusion.
def {TERMS}(text):
    return {{w for w in "".join(c if c.isalnum() else " " for c in text.lower()).split() if len(w) > 3}}


# Hybrid ranking: read()'s own order (its similarity ranking) fused with a keyword ranking by the query words
# each entry shares (reciprocal-rank fusion), so an entry holding the question's names and nouns comes first.
def {FUSE}(text, query):
    wanted = {TERMS}(str(query))
    entries = {ENTRIES}(text)
    by_words = sorted(range(len(entries)), key=lambda i: -len(wanted & {TERMS}(entries[i])))
    score = [1 / ({FUSION_RANK_NAME} + i) for i in range(len(entries))]
    for rank, i in enumerate(by_words):
        score[i] += 1 / ({FUSION_RANK_NAME} + rank)
    fused = "\\n\\n".join(entries[i] for i in sorted(range(len(entries)), key=lambda i: -score[i]))
    # Entries are set apart by a blank line: never longer than what read() found (its cap holds).
    return fused[:len(text)]
'''

_CAP_SOURCE = f'''# At most MAX_PER_SOURCE entries of one source (the [date] header an entry opens with): one long session does not
# fill read()'s room, and a question whose evidence spans sessions sees each of them.
def {CAP}(text):
    kept, seen = [], {{}}
    for entry in {ENTRIES}(text):
        key = entry.split("]", 1)[0] if entry.startswith("[") else ""
        seen[key] = seen.get(key, 0) + 1
        if not key or seen[key] <= {MAX_PER_SOURCE_NAME}:
            kept.append(entry)
    return "\\n\\n".join(kept)
'''


def caps_in(contexts: Sequence[str]) -> bool:
    """Whether the child's cap would leave an entry out of one of these contexts (read()'s text as the reflector
    was shown it): where no source has more than its share there, the cap changes nothing the failures saw."""
    return changes_one(f"{MAX_PER_SOURCE_NAME} = {MAX_PER_SOURCE}\n{_ENTRIES_SOURCE}\n\n{_CAP_SOURCE}", CAP, contexts,
                       entries=ENTRIES)


def _read(parsed: _Source) -> _Function:
    cls = _module_class(parsed.tree, LOGIC_CLASS)
    read = _methods(cls).get("read") if cls else None
    if read is None:
        raise NoMutation("the program has no read() to rank")
    return read


def _entries_helper(parsed: _Source) -> str:
    """The entries helper's source, unless the other ranking edit already put it in the program."""
    return "" if ENTRIES in _bindings(parsed.tree) else f"\n\n{_ENTRIES_SOURCE}"


def _wraps(parsed: _Source, read: _Function, helper: str, extra: str = "") -> list[_Edit]:
    edits = [e for node in _returns(read) if node.value is not None and (e := _wrapped(parsed, node.value, helper, extra))]
    if not edits:
        raise NoMutation("read() returns nothing but literals")
    return edits


def _counts_read_uses(parsed: _Source, read: _Function) -> list[tuple[str, ast.Constant, int]]:
    """The module constants read() retrieves a number of entries by (an int count, not a size): each one's
    name, literal and count."""
    used = {n.id for n in ast.walk(read) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    found = []
    for stmt in parsed.tree.body:
        name, number = _constant_target(stmt), _constant_number(stmt)
        if name in used and name is not None and _COUNT_NAME.search(name) and not _SIZE_NAME.search(name) \
                and number is not None and type(number.value) is int and number.value <= 100:
            found.append((name, number, number.value))
    return found


def fuse_keyword_scores(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Re-rank what read() returns by fusing its order with a keyword order (once), fetching three times as many."""
    parsed = _Source(source)
    read = _read(parsed)
    params = read.args.posonlyargs + read.args.args
    if len(params) < 2:
        raise NoMutation("read() takes no query")
    if {FUSE, TERMS, FUSION_RANK_NAME} & set(_bindings(parsed.tree)):
        raise NoMutation("read() already fuses keyword and similarity ranks")
    edits = _wraps(parsed, read, FUSE, f", {params[1].arg}")
    widened = []
    for name, number, count in _counts_read_uses(parsed, read):
        start, end = parsed.span(number)
        edits.append(_Edit(start, end, repr(count * OVERFETCH)))
        widened.append(f"{name} x{OVERFETCH}")
    constant = f"{FUSION_RANK_NAME} = {FUSION_RANK}\n{_entries_helper(parsed)}\n\n{_FUSE_SOURCE}"
    child = _apply(source, [_constant_insertion(parsed, "\n\n" + constant), *edits])
    if not _valid(source, child, avoid):
        raise NoMutation("fusing keyword ranks into read() gives no new valid program")
    more = f", retrieving more ({', '.join(widened)})" if widened else ""
    return Mutation("fuse_keyword_scores", f"read() ranks its entries by fusing its own order with the query words "
                    f"each shares (reciprocal rank){more}", child)


def cap_per_source(source: str, rng: random.Random, *, avoid: Collection[str] = ()) -> Mutation:
    """Keep at most ``MAX_PER_SOURCE`` entries of one ``[date]`` source in what read() returns (once)."""
    parsed = _Source(source)
    read = _read(parsed)
    if {CAP, MAX_PER_SOURCE_NAME} & set(_bindings(parsed.tree)):
        raise NoMutation("read() already caps entries per source")
    edits = _wraps(parsed, read, CAP)
    constant = f"{MAX_PER_SOURCE_NAME} = {MAX_PER_SOURCE}\n{_entries_helper(parsed)}\n\n{_CAP_SOURCE}"
    child = _apply(source, [_constant_insertion(parsed, "\n\n" + constant), *edits])
    if not _valid(source, child, avoid):
        raise NoMutation("capping read()'s entries per source gives no new valid program")
    return Mutation("cap_per_source", f"read() returns at most {MAX_PER_SOURCE_NAME} = {MAX_PER_SOURCE} entries of one "
                    "[date] source (one session no longer fills its room)", child)
