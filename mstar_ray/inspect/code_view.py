"""The report's view of the code a search produced: the lineage as a tree a person can follow, each
candidate's diff against its parent beside the reflector's commit message, and the returned program's
source. Plain HTML (``<details>`` to fold, no script), and every piece of candidate text is escaped: a
program or a commit message is data, never markup."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass

from mstar_ray.inspect.figures import plural, shortened
from mstar_ray.line_diff import unified_diff

# A report of a long run stays readable and small: the returned program's ancestry always, then the best of
# the rest (with their ancestors, so the tree stays connected), up to this many diffs and tree entries.
MAX_DIFFS = 200
MAX_TREE = 400


@dataclass(frozen=True)
class Node:
    """One evaluated candidate as the report shows it (a candidates row's fields that matter here)."""

    id: str
    parent: str | None
    origin: str
    commit_message: str
    score: float | None
    status: str


def _label(node: Node, returned: str) -> str:
    score = "-" if node.score is None else f"{node.score:.3f}"
    mark = " <b>returned</b>" if node.id == returned else ""
    status = "" if node.status == "evaluated" else f" <i>({html.escape(node.status)})</i>"
    return (f"<a href='#c-{node.id}'><code>{node.id}</code></a> {score} {html.escape(node.origin)}{status}{mark}"
            f" {_message(node.commit_message, 120)}")


def _message(text: str, limit: int) -> str:
    """A commit message cut at a word with an ellipsis, the whole of it on hover (escaped in both places)."""
    return f"<span class='msg' title='{html.escape(text, quote=True)}'>{html.escape(shortened(text, limit))}</span>"


def ancestry(node_id: str, nodes: dict[str, Node]) -> list[str]:
    """The id, its parent, the parent's parent ... up to a seed (or a parent the logs do not hold)."""
    chain, current = [], nodes.get(node_id)
    while current is not None and current.id not in chain:
        chain.append(current.id)
        current = nodes.get(current.parent) if current.parent else None
    return chain


def _kept(nodes: dict[str, Node], returned: str) -> set[str]:
    """The tree's entries: every node when few, else the returned line, then the best others with their
    ancestors, until ``MAX_TREE``."""
    if len(nodes) <= MAX_TREE:
        return set(nodes)
    kept = set(ancestry(returned, nodes))
    for node in sorted(nodes.values(), key=lambda n: -(n.score or 0.0)):
        line = ancestry(node.id, nodes)
        if len(kept | set(line)) > MAX_TREE:
            break
        kept.update(line)
    return kept


def lineage_tree(nodes: dict[str, Node], returned: str) -> str:
    """Nested lists from each seed down, a branch per program with more than one child (an only child stands
    under its parent, marked); the returned program's branches are unfolded, the others folded."""
    kept = _kept(nodes, returned)
    children: dict[str | None, list[Node]] = {}
    for node in nodes.values():
        if node.id in kept:
            children.setdefault(node.parent if node.parent in kept else None, []).append(node)
    for siblings in children.values():
        siblings.sort(key=lambda n: -(n.score or 0.0))
    on_path = set(ancestry(returned, nodes))
    parts: list[str] = ["<ul class='tree'>"]
    # (node, whether it is its parent's only child); a string: the closing tags of a branch
    stack: list[tuple[Node, bool] | str] = [(n, False) for n in reversed(children.get(None, []))]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            parts.append(item)
            continue
        node, only = item
        label = ("&#8627; " if only else "") + _label(node, returned)
        below = children.pop(node.id, [])
        if len(below) == 1:  # a line of only children stays flat, one under the other: depth is branching only
            parts.append(f"<li>{label}</li>")
            stack.append((below[0], True))
        elif not below:
            parts.append(f"<li>{label}</li>")
        else:
            opened = " open" if node.id in on_path else ""
            parts.append(f"<li><details{opened}><summary>{label} · {plural(len(below), 'child', 'children')}</summary><ul class='tree'>")
            stack.append("</ul></details></li>")
            stack.extend((n, False) for n in reversed(below))
    parts.append("</ul>")
    omitted = len(nodes) - len(kept)
    note = (f"<p>{plural(omitted, 'more program', 'more programs')} not shown (the returned line and the best {len(kept)} with their "
            "ancestors are)</p>" if omitted else "")
    return ("<p>each program under its parent, children by static score (&#8627;: the only child of the line above); "
            "the returned program's line of descent is unfolded</p>" + "".join(parts) + note)


def diff_lines(before: str, after: str, before_name: str, after_name: str) -> list[tuple[str, str]]:
    """A unified diff as (kind, line): add, del, hunk (a hunk header) or ctx; the text as it is (not escaped)."""
    lines = []
    for line in unified_diff(before, after, before_name, after_name).lines:  # bounded work: mstar_ray.line_diff
        kind = ("add" if line.startswith("+") and not line.startswith("+++") else
                "del" if line.startswith("-") and not line.startswith("---") else
                "hunk" if line.startswith("@@") else "ctx")
        lines.append((kind, line))
    return lines


def diff_html(before: str, after: str, before_name: str, after_name: str) -> str:
    """A unified diff, each line escaped and marked as added, removed or a hunk header."""
    lines = [f"<span class='{kind}'>{html.escape(line)}</span>"
             for kind, line in diff_lines(before, after, before_name, after_name)]
    if not lines:
        return "<p>(no textual change)</p>"
    return "<pre class='diff'>" + "".join(lines) + "</pre>"  # each line a block: no newline between them


def diffs_section(nodes: dict[str, Node], returned: str, source: Callable[[str | None], str | None]) -> str:
    """Each child against its parent, the reflector's message beside it: the returned program's ancestry
    first (oldest change first), then the rest by static score, at most ``MAX_DIFFS``."""
    path = [n for n in reversed(ancestry(returned, nodes)) if nodes[n].parent]
    rest = sorted((n for n in nodes.values() if n.parent and n.id not in path), key=lambda n: -(n.score or 0.0))
    shown = [nodes[n] for n in path] + rest
    omitted = max(0, len(shown) - MAX_DIFFS)
    parts = []
    for node in shown[:MAX_DIFFS]:
        before, after = source(node.parent), source(node.id)
        if before is None or after is None:
            body = "<p>(a source is missing from the run directory)</p>"
        else:
            body = diff_html(before, after, f"{node.parent}.py", f"{node.id}.py")
        # the returned line unfolded; when a seed was returned, the best child, so one diff is always in view
        opened = " open" if node.id in path or (not path and node is shown[0]) else ""
        score = "-" if node.score is None else f"{node.score:.3f}"
        parts.append(
            f"<details id='c-{node.id}' class='change'{opened}><summary><code>{node.id}</code> {score} from "
            f"<code>{html.escape(node.parent or '')}</code>{' · on the returned line' if node.id in path else ''}"
            f" {_message(node.commit_message, 100)}</summary><div class='change-body'><div class='msg'><b>commit message</b><br>"
            f"{html.escape(node.commit_message)}</div>{body}</div></details>")
    note = (f"<p>{plural(omitted, 'more change', 'more changes')} not shown (the best {MAX_DIFFS} and the returned line are); the run "
            "directory's programs/ holds every source</p>" if omitted else "")
    return ("<p>every child against its parent; the returned program's line of descent first, unfolded</p>"
            + "".join(parts) + note)


def source_html(source: str) -> str:
    """A program with line numbers, escaped."""
    width = len(str(source.count("\n") + 1))
    numbered = "\n".join(f"<span class='ln'>{i:>{width}}</span> {html.escape(line)}"
                         for i, line in enumerate(source.splitlines(), 1))
    return f"<pre class='source'>{numbered}</pre>"


STYLE = ("pre.diff .add{background:#e6ffec;display:block}pre.diff .del{background:#ffebe9;display:block}"
         "pre.diff .hunk{color:#6f42c1;display:block}pre.diff .ctx{display:block}"
         ".ln{color:#999;user-select:none}ul.tree{list-style:none;padding-left:1.2em;border-left:1px dotted #bbb}"
         ".msg{color:#555}details.change{border:1px solid #ddd;margin:.3em 0;padding:.2em .5em}"
         ".change-body{display:flex;gap:1em;align-items:flex-start}.change-body .msg{flex:0 0 16em;"
         "white-space:pre-wrap;font-size:85%}.change-body pre{flex:1}")
