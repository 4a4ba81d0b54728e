"""The views of a run as HTML: the sections ``assets/views.js`` draws into, and what it needs to draw them
(plotly.js from the ``plotly`` package, nothing fetched from elsewhere). The live page links them from the server
(``inspect.server``); the report inlines them, so it stays one self-contained file drawn the same way."""

from __future__ import annotations

import html
import json
from functools import cache
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).with_name("assets")

# (element id, title): the views views.js fills, in page order
SECTIONS = [("facts", "The run"), ("scores", "Scores: each candidate, and what the run would return"),
            ("lineage", "Lineage: each line joins a parent to its child"), ("population", "Programs, newest first"),
            ("failures", "Where the failures went wrong"), ("flight", "In flight"), ("nodes", "Nodes")]
HINT = ("hover a point for its program, change and score; click it (or a program's id) for its diff; the star marks "
        "the program the run returns")


@cache
def plotly_js() -> bytes:
    """plotly.min.js as the installed ``plotly`` package ships it (its version pinned by the package's)."""
    import plotly

    return (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()


def asset(name: str) -> bytes:
    return (ASSETS / name).read_bytes()


def sections(only: list[str] | None = None) -> str:
    """The containers of the views, titled; the plots say how to use them."""
    parts = []
    for key, title in SECTIONS:
        if only is not None and key not in only:
            continue
        hint = f"<p class='hint'>{HINT}</p>" if key == "scores" else ""
        parts.append(f"<section><h2>{title}</h2>{hint}<div id='{key}'{' class=plot' if key in ('scores', 'lineage') else ''}>"
                     "</div></section>")
    return "".join(parts)


def live_page(run_dir: Path) -> str:
    """The live page's shell; its data comes from ``api/run`` (a relative URL: the page works under any prefix)."""
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>mstar-ray {html.escape(run_dir.name)}</title><link rel='stylesheet' href='page.css'>"
            "<script src='plotly.min.js'></script><script src='views.js'></script></head><body>"
            f"<h1>Run {html.escape(str(run_dir))}</h1><div id='progress'></div><div id='status'>loading</div>"
            + sections() +
            "<section><h2>Change</h2><div id='change'>(click a point or a program)</div></section>"
            "<script src='live.js'></script></body></html>")


def json_for_script(data: object) -> str:
    """JSON that cannot end the ``<script>`` element holding it, whatever strings it carries."""
    return (json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def inline_views(snapshot: dict[str, Any], only: list[str]) -> tuple[str, str]:
    """(head, body) for the report: the style, plotly.js and views.js inlined, the snapshot as JSON, and a click
    that opens the clicked program's change further down the report."""
    head = (f"<style>{asset('page.css').decode()}</style><script>{plotly_js().decode()}</script>"
            f"<script>{asset('views.js').decode()}</script>")
    body = (sections(only) + f"<script type='application/json' id='snapshot'>{json_for_script(snapshot)}</script>"
            "<script>MstarViews.render(JSON.parse(document.getElementById('snapshot').textContent), function (id) {"
            " const change = document.getElementById('c-' + id); if (change) { change.open = true;"
            " change.scrollIntoView(); } });</script>")
    return head, body
