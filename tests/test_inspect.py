"""``status``, ``export`` and ``report`` on a real finished run, and on a run whose driver is live or gone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mstar_ray.cli import main
from mstar_ray.inspect.status import driver_alive, status_text
from mstar_ray.runlog.reader import read_rows
from mstar_ray.runlog.writer import LogWriter
from scripts.fault_resume import config

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("inspect")
    path = tmp / "run.yaml"
    path.write_text(yaml.safe_dump(config(6)))
    run_dir = tmp / "run"
    done = subprocess.run([sys.executable, "-m", "mstar_ray.cli", "run", str(path), "--run-dir", str(run_dir),
                           "--serve", "--serve-port", "0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (tmp / "stdout.txt").write_text(done.stdout)
    (tmp / "stderr.txt").write_text(done.stderr)
    return run_dir


def test_run_serve_prints_its_live_page(finished_run):
    stderr = (finished_run.parent / "stderr.txt").read_text()
    assert re.search(r"^live page http://127\.0\.0\.1:\d+/ \(while this run lasts\)$", stderr, re.M), stderr[:2000]


def test_a_run_ends_with_a_short_summary_on_stdout(finished_run):
    """What a user asks at the end: which program and why, against the best seed, what it cost, where it is."""
    printed = (finished_run.parent / "stdout.txt").read_text()
    summary = json.loads((finished_run / "summary.json").read_text())
    best = summary["best"]
    assert printed.startswith(f"returned  {best['id']} ")
    assert f"chosen by {summary['selection']['rule']}: " in printed
    row = next(line for line in printed.splitlines() if line.startswith("  returned "))
    low, high = best["static_interval"]
    assert f"{best['static_score']:.3f} [{low:.3f}, {high:.3f}]" in row
    test_low, test_high = best["test_interval"]
    assert test_low <= best["test_score"] <= test_high and f"{best['test_score']:.3f} [{test_low:.3f}" in row
    assert f"{summary['candidates_evaluated']} candidates evaluated" in printed and "violations" in printed
    assert f"cost      ${summary['cost_usd']:.4f}" in printed and f"wall time {summary['wall_seconds']:.1f} s" in printed
    for line in (f"program   {finished_run / 'best.py'}", f"summary   {finished_run / 'summary.json'}",
                 f"report    mstar-ray report {finished_run}"):
        assert line in printed


def test_status_of_a_finished_run(finished_run, capsys):
    assert main(["status", str(finished_run)]) == 0
    text = capsys.readouterr().out
    assert "(finished)" in text and "6/6 candidates evaluated" in text
    assert re.search(r"returned\s+0\.\d{3} \[0\.\d{3}, [01]\.\d{3}\] [0-9a-f]{16}", text) and "test      best" in text
    summary = json.loads((finished_run / "summary.json").read_text())
    low, high = summary["best"]["test_interval"]
    assert f"test      best {summary['best']['test_score']:.3f} [{low:.3f}, {high:.3f}]" in text  # as the summary says it
    assert "(seed: seed " not in text and " 1 duplicates" not in text
    assert "holding 100% of the static questions' evidence" in text
    assert re.search(r"chosen by (best seed|paired bootstrap|confirmation): ", text)
    assert re.search(r"failures  best: \d+ \w+", text)  # its failures attributed to a stage


def test_export_writes_the_best_program(finished_run, tmp_path, capsys):
    out = tmp_path / "best.py"
    assert main(["export", str(finished_run), "--best", str(out)]) == 0
    assert out.read_text() == (finished_run / "best.py").read_text()


def test_report_is_one_self_contained_html_file(finished_run, tmp_path):
    out = tmp_path / "report.html"
    assert main(["report", str(finished_run), "--out", str(out)]) == 0
    page = out.read_text()
    assert page.count("<img src=\"data:image/png;base64,") == 5 and "diff from its seed" in page
    assert "Where the failures went wrong: storage, retrieval or answering" in page
    # the interactive plots are the live page's own views, plotly.js inlined: no script is loaded from anywhere
    assert "src=\"http" not in page and "<script src" not in page and page.count("<script") == 4
    assert "what the run would return" in page and "MstarViews.render(" in page
    assert "Structural clusters" in page and "<th>medoid</th>" in page
    # the Pareto front: its members with their per-category static means and weights
    assert "Pareto front" in page and "programs on the front over every static question" in page
    assert "<th>best on</th>" in page


def test_the_run_stores_its_structural_clusters_and_the_report_recomputes_them_without(finished_run, tmp_path):
    import json
    import shutil

    from mstar_ray.inspect.report import _population_map
    from mstar_ray.runlog.reader import read_rows
    from mstar_ray.structure.population_map import PopulationMap

    stored = PopulationMap.model_validate_json((finished_run / "structure.json").read_text())
    evaluated = [r.id for r in read_rows(finished_run, "candidates") if r.status == "evaluated"]
    assert sorted(stored.ids) == sorted(evaluated) and len(stored.labels) == len(stored.coords) == len(evaluated)
    assert set(stored.medoids) <= set(stored.ids) and 0 < stored.mean_distance <= 1
    summary = json.loads((finished_run / "summary.json").read_text())
    assert summary["structural_clusters"] == len(stored.medoids)
    copy = tmp_path / "copy"
    shutil.copytree(finished_run, copy)
    (copy / "structure.json").unlink()
    from mstar_ray.state.replay import restore

    recomputed = _population_map(copy, restore(copy).members)
    assert recomputed.ids == stored.ids and recomputed.labels == stored.labels
    assert max(abs(a - b) for p, q in zip(recomputed.coords, stored.coords) for a, b in zip(p, q)) < 1e-9


def test_a_live_driver_is_seen_through_its_log_lock(finished_run):
    assert not driver_alive(finished_run)
    with LogWriter(finished_run, "events"):
        assert driver_alive(finished_run)
        assert "(running)" in status_text(finished_run)


def test_a_run_without_a_summary_is_interrupted(finished_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(finished_run, copy)
    (copy / "summary.json").unlink()
    assert f"interrupted; resume it with mstar-ray run --resume {copy}" in status_text(copy)


def test_status_of_something_that_is_not_a_run(tmp_path, capsys):
    assert main(["status", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_status_prints_a_hostile_commit_message_with_its_controls_spelled_out(finished_run, tmp_path, capsys):
    """A reflector's commit message is model output: the log holds it as written, ``status`` shows it inert."""
    import shutil

    from mstar_ray.runlog import layout
    from mstar_ray.runlog.reader import read_rows

    copy = tmp_path / "hostile"
    shutil.copytree(finished_run, copy)
    payload = "\x1b]0;pwned\x07\x1b[2K\rfinal program 0123456789abcdef 1.000\x9b31m\u202e\x1b]52;c;cG93bmVk\x07"
    rows = [row.model_copy(update={"commit_message": payload}) for row in read_rows(copy, "candidates")]
    layout.log_path(copy, "candidates").unlink()
    with LogWriter(copy, "candidates") as writer:
        writer.append(rows)
    assert main(["status", str(copy)]) == 0
    text = capsys.readouterr().out
    assert "\\x1b]0;pwned\\x07" in text
    assert not any(c in text for c in "\x1b\x07\r\x9b\u202e")


def _browser():
    from tests.headless_browser import open_browser

    return open_browser()


RENDERED = {
    "images": "Array.from(document.images).length",
    "drawn": "Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0 && i.height > 0).length",
    "scripts": "document.scripts.length",
    "tree": "document.querySelectorAll('ul.tree li').length",
    "changes": "document.querySelectorAll('details.change').length",
    "diff_height": "(() => { const d = document.querySelector('details.change'); if (!d) return 0; d.open = true;"
                   " return d.querySelector('pre.diff, p').getBoundingClientRect().height; })()",
    "added": "document.querySelectorAll('pre.diff .add').length",
    "added_colour": "(() => { const a = document.querySelector('pre.diff .add');"
                    " return a ? getComputedStyle(a).backgroundColor : null; })()",
    "source": "(document.querySelector('pre.source') || {}).innerText || ''",
    "points": "document.querySelectorAll('#scores .scatterlayer .point').length",
    "star": "document.getElementById('scores').data.find(t => t.marker && t.marker.symbol === 'star').customdata[0][0]",
    "line_end": "(() => { const t = document.getElementById('scores').data.find(t => t.mode === 'lines');"
                " return t.y[t.y.length - 1]; })()",
    "clicked": "(() => { const plot = document.getElementById('scores'); const t = plot.data.find(t => t.name === 'children');"
               " const id = t.customdata[0][0]; const d = document.getElementById('c-' + id); d.open = false;"
               " plot.emit('plotly_click', {points: [{customdata: t.customdata[0]}]}); return d.open; })()",
}


def test_the_report_renders_in_headless_chromium_without_errors_or_network(finished_run, tmp_path):
    """Debian's Chromium opens the report: no console error, nothing fetched but the file itself and its
    embedded images, every plot drawn, the lineage tree holds every candidate, and a diff is shown coloured."""
    out = tmp_path / "report.html"
    assert main(["report", str(finished_run), "--out", str(out)]) == 0
    evaluated = [r for r in read_rows(finished_run, "candidates") if r.status not in ("duplicate",)]
    browser = _browser()
    try:
        visit = browser.visit(out, RENDERED)
    finally:
        browser.close()
    values = visit.values
    assert visit.errors == []
    assert all(url.startswith(("file:", "data:")) for url in visit.requests), visit.requests
    assert values["images"] >= 5 and values["drawn"] == values["images"] and values["scripts"] == 4
    # the scores plot: a point per candidate with a score, the returned program starred, the line of what the run
    # would return ending on it; a click on a point opens that program's change further down
    assert values["points"] >= len([r for r in evaluated if r.static_score is not None])
    summary = json.loads((finished_run / "summary.json").read_text())
    assert values["star"] == summary["best"]["id"] and values["line_end"] == pytest.approx(summary["best"]["static_score"])
    assert values["clicked"] is True
    assert values["tree"] == len(evaluated)
    assert values["changes"] == sum(r.parent is not None for r in evaluated) and values["diff_height"] > 0
    assert values["added"] > 0 and values["added_colour"] == "rgb(230, 255, 236)"
    assert "class KnowledgeBase" in values["source"] and "INSTRUCTION_RESPONSE" in values["source"]


def test_candidate_text_in_the_report_is_escaped_in_a_real_browser(tmp_path):
    """A commit message and a program that carry markup stay text: no element, no script runs."""
    from mstar_ray.inspect.code_view import STYLE, Node, diffs_section, lineage_tree, source_html

    hostile = "</pre></details><script>window.pwned = 1</script><img src=x onerror='window.pwned = 2'>"
    nodes = {"a" * 16: Node("a" * 16, None, "seed", "seed one", 0.1, "evaluated"),
             "b" * 16: Node("b" * 16, "a" * 16, "reflection", hostile, 0.2, "evaluated")}
    sources = {"a" * 16: "X = 1\n", "b" * 16: f"X = 1\nY = '{hostile}'\n"}
    page = tmp_path / "page.html"
    page.write_text(f"<!doctype html><html><head><style>{STYLE}</style></head><body>"
                    f"{lineage_tree(nodes, 'b' * 16)}{diffs_section(nodes, 'b' * 16, sources.get)}"
                    f"{source_html(sources['b' * 16])}</body></html>", encoding="utf-8")
    browser = _browser()
    try:
        visit = browser.visit(page, {"pwned": "window.pwned || 0", "scripts": "document.scripts.length",
                                     "images": "document.images.length",
                                     "text": "document.querySelector('pre.diff .add').innerText"})
    finally:
        browser.close()
    assert visit.errors == [] and visit.values["pwned"] == 0
    assert visit.values["scripts"] == 0 and visit.values["images"] == 0
    assert visit.values["text"].startswith("+Y = '</pre></details><script>")


HOSTILE = "</script><img src=x onerror='window.pwned = 1'><script>window.pwned = 2</script>"


def _with_hostile_row(finished_run: Path, copy: Path) -> str:
    """A copy of the run and, stored in it, a child of its last program whose source carries markup; its id."""
    import shutil

    from mstar_ray.runlog.sources import load_source, store_source

    shutil.copytree(finished_run, copy)
    last = [r for r in read_rows(copy, "candidates") if r.status == "evaluated"][-1]
    return store_source(copy, load_source(copy, last.id) + f"\nHOSTILE = {HOSTILE!r}\n")


def _append_hostile(run_dir: Path, child: str) -> None:
    last = [r for r in read_rows(run_dir, "candidates") if r.status == "evaluated"][-1]
    row = last.model_copy(update={"id": child, "parent": last.id, "commit_message": HOSTILE, "verdict": "kept",
                                  "origin": "reflection"})
    with LogWriter(run_dir, "candidates") as writer:
        writer.append([row])


def test_the_live_page_shows_a_new_row_without_a_reload_and_keeps_hostile_text_inert(finished_run, tmp_path):
    """``mstar-ray serve``'s page in headless Chromium: it draws the run, then a candidate row appended to the log
    appears on the page by itself (no navigation), its markup shown as text; hover data and a click's diff come
    from the server; nothing is fetched from anywhere else."""
    from mstar_ray.inspect.server import start

    run = tmp_path / "live"
    child = _with_hostile_row(finished_run, run)
    before = len([r for r in read_rows(run, "candidates") if r.status not in ("duplicate", "screened_out")])
    server = start(run, "127.0.0.1", 0)
    browser = _browser()
    try:
        tab = browser.open(server.url)
        rows = "document.querySelectorAll('#population tr[data-id]').length"
        assert browser.wait_until(tab, f"{rows} === {before}") is True
        assert browser.evaluate(tab, "document.querySelectorAll('#scores .point').length") >= before
        browser.evaluate(tab, "window.loaded = 'first'")  # a reload would forget it
        builds = server.snapshots.builds
        _append_hostile(run, child)
        assert browser.wait_until(tab, f"{rows} === {before + 1}") is True
        assert server.snapshots.builds == builds + 1  # the logs were read again once, for the change
        assert browser.evaluate(tab, "window.loaded") == "first"
        shown = browser.evaluate(tab, f"document.querySelector('#population tr[data-id=\"{child}\"] td.msg').textContent")
        assert shown == HOSTILE
        assert browser.evaluate(tab, "window.pwned || 0") == 0
        assert browser.evaluate(tab, "document.querySelectorAll('body img').length") == 0
        # a click on the program opens its diff beside its message, drawn from the server's JSON as text
        browser.evaluate(tab, f"document.querySelector('#population tr[data-id=\"{child}\"] a').click()")
        assert browser.wait_until(tab, "document.querySelector('#change h3') && document.querySelector('#change h3')"
                                       ".textContent") == f"{child} from {[r for r in read_rows(run, 'candidates') if r.status == 'evaluated'][-2].id}"
        assert browser.evaluate(tab, "document.querySelector('#change .msg').textContent").endswith(HOSTILE)
        # Plotly's hover text carries the message with its markup as entities
        hover = browser.evaluate(tab, "JSON.stringify(document.getElementById('scores').data.map(t => t.customdata || []))")
        assert "&lt;/script&gt;&lt;img" in hover and "<img" not in hover
        # hovering the child's point shows its message as text, not as elements
        label = browser.evaluate(tab, f"""(async () => {{
            const plot = document.getElementById('scores');
            const curve = plot.data.findIndex(t => t.name === 'children');
            const point = plot.data[curve].customdata.findIndex(d => d[0] === '{child}');
            Plotly.Fx.hover(plot, [{{curveNumber: curve, pointNumber: point}}]);
            await new Promise(done => setTimeout(done, 200));
            return document.querySelector('#scores .hovertext').textContent; }})()""")
        assert child in label and "</script><img src=x" in label
        assert browser.evaluate(tab, "window.pwned || 0") == 0
        visit = browser.collect()
    finally:
        browser.close()
        server.shutdown()
    assert visit.errors == []
    assert all(url.startswith(server.url.rstrip("/")) or url.startswith("data:") for url in visit.requests), visit.requests


def test_the_page_off_loopback_needs_its_token_and_on_loopback_refuses_other_hosts(finished_run):
    import http.client

    from mstar_ray.inspect.server import start, token_for

    assert token_for("127.0.0.1", None) is None and token_for("::1", None) is None
    assert len(token_for("0.0.0.0", None)) >= 32 and token_for("10.1.2.3", "given") == "given"

    def get(server, path, headers=None):
        connection = http.client.HTTPConnection(*server.server_address[:2])
        connection.request("GET", path, headers=headers or {})
        reply = connection.getresponse()
        return reply.status, reply.getheader("Set-Cookie"), reply.read()

    guarded = start(finished_run, "127.0.0.1", 0, token="s3cret-token")
    try:
        assert get(guarded, "/api/run")[0] == 403 and get(guarded, "/?token=wrong")[0] == 403
        status, cookie, _ = get(guarded, "/?token=s3cret-token")
        assert status == 200 and "HttpOnly" in cookie
        status, _, body = get(guarded, "/api/run", {"Cookie": cookie.split(";")[0]})
        assert status == 200 and json.loads(body)["progress"]["phase"] == "finished"
    finally:
        guarded.shutdown()
    open_here = start(finished_run, "127.0.0.1", 0)
    try:
        port = open_here.server_address[1]
        assert get(open_here, "/api/run", {"Host": f"127.0.0.1:{port}"})[0] == 200
        assert get(open_here, "/api/run", {"Host": f"attacker.example:{port}"})[0] == 403  # DNS rebinding
    finally:
        open_here.shutdown()


def test_a_page_on_every_address_prints_this_machines_name_not_the_wildcard(finished_run):
    import socket

    from mstar_ray.inspect.server import start

    everywhere = start(finished_run, "0.0.0.0", 0, token="s3cret-token")
    try:
        assert everywhere.url == f"http://{socket.gethostname()}:{everywhere.server_address[1]}/?token=s3cret-token"
    finally:
        everywhere.shutdown()


def test_serve_refuses_what_is_not_a_run_directory(tmp_path, capsys):
    assert main(["serve", str(tmp_path), "--port", "0"]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_the_page_reads_the_logs_again_only_when_they_changed_and_not_more_often_than_its_gap(finished_run, tmp_path):
    """Polling costs nothing while the logs stand still; a change is read once, and not before the gap since the
    last read has passed (a page served from the driver's process takes a bounded share of it)."""
    from mstar_ray.inspect.server import Snapshots

    run = tmp_path / "gap"
    child = _with_hostile_row(finished_run, run)
    snapshots = Snapshots(run)
    snapshots.MIN_GAP_S = 3600.0

    def shown() -> list[str]:
        return [c["id"] for c in json.loads(snapshots.current())["candidates"]]

    first = shown()
    for _ in range(3):
        assert shown() == first
    assert snapshots.builds == 1
    version = json.loads(snapshots.current())["version"]
    assert json.loads(snapshots.current(since=version)) == {"version": version, "unchanged": True}  # a page up to date
    _append_hostile(run, child)
    assert shown() == first and snapshots.builds == 1  # changed, but within the gap: the last read is served
    snapshots.next_read = 0.0  # the gap has passed
    assert shown() == [*first, child] and snapshots.builds == 2


def test_a_reference_is_tested_as_the_run_tested_its_own_program(finished_run):
    """scripts/reference_share.py: the run's returned program, given as the reference, scores on each test question
    exactly what the run's own test gave it."""
    from scripts.child_yield import test_rows
    from scripts.reference_share import reference_scores

    best, _, scored = test_rows(finished_run)
    again = reference_scores(finished_run, (finished_run / "best.py").read_text())
    assert scored[best] and again == {q: row["score"] for q, row in scored[best].items()}
