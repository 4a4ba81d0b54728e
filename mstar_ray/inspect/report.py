"""``mstar-ray report RUN_DIR``: one self-contained HTML file (plots embedded as PNG) from the run's logs:
scores against candidates, wall time and cost, the lineage tree, per-category scores of the best against
the seeds, worker utilisation over time, the population's structural clusters on a 2-D map, the best
program's diff from its seed, and the code itself (``code_view``: the lineage as a tree, each child's diff
against its parent, the returned program's source)."""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: figures are only ever rendered to PNG
import matplotlib.pyplot as plt  # noqa: E402

from mstar_ray.exit_codes import InputError  # noqa: E402
from mstar_ray.inspect.code_view import STYLE, Node, diffs_section, lineage_tree, source_html  # noqa: E402
from mstar_ray.inspect.status import chosen, metrics, tested  # noqa: E402
from mstar_ray.line_diff import unified_diff  # noqa: E402
from mstar_ray.run_config import load_run_config  # noqa: E402
from mstar_ray.runlog import layout  # noqa: E402
from mstar_ray.runlog.reader import read_rows  # noqa: E402
from mstar_ray.runlog.sources import load_source  # noqa: E402
from mstar_ray.runlog.transfer import TransferMatrix  # noqa: E402
from mstar_ray.search.pareto import ParetoParents  # noqa: E402
from mstar_ray.search.population import Population  # noqa: E402
from mstar_ray.search.split import Split  # noqa: E402
from mstar_ray.state.replay import restore  # noqa: E402
from mstar_ray.structure.population_map import PopulationMap, map_population  # noqa: E402
from mstar_ray.structure.index import StructureIndex  # noqa: E402


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return '<img src="data:image/png;base64,' + base64.b64encode(buffer.getvalue()).decode() + '">'


def _scores_plot(rows) -> str:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    xs = list(range(1, len(rows) + 1))
    scores = [r.static_score or 0.0 for r in rows]
    best, running = [], 0.0
    for row in rows:  # the incumbent's score: it changes only when a program beats it beyond the noise
        if row.verdict == "replaces":
            running = row.static_score or 0.0
        best.append(running)
    colours = ["tab:green" if r.origin == "seed" else "tab:red" if r.status == "violation" else "tab:blue" for r in rows]
    spread = [(i, r) for i, r in zip(xs, rows) if r.static_low is not None and r.static_high is not None]
    if spread:
        ax.errorbar([i for i, _ in spread], [r.static_score for _, r in spread],
                    yerr=[[r.static_score - r.static_low for _, r in spread], [r.static_high - r.static_score for _, r in spread]],
                    fmt="none", ecolor="lightgrey", elinewidth=1, label="95% bootstrap interval")
    ax.scatter(xs, scores, c=colours, s=18, label="candidates (green: seeds, red: violations)", zorder=3)
    ax.step(xs, best, where="post", color="black", label="best so far (replaced only beyond the noise)")
    ax.set_xlabel("candidates evaluated")
    ax.set_ylabel("static score")
    ax.legend(fontsize=8)
    return _png(fig)


def _time_cost_plot(rows, calls) -> str:
    fig, left = plt.subplots(figsize=(7, 3.5))
    start = min(r.finished_at for r in rows)
    left.plot([(r.finished_at - start).total_seconds() for r in rows], range(1, len(rows) + 1), color="tab:blue")
    left.set_xlabel("wall time (s)")
    left.set_ylabel("candidates evaluated", color="tab:blue")
    right = left.twinx()
    spent, total = [], 0.0
    for call in sorted(calls, key=lambda c: c.at):
        total += call.cost_usd
        spent.append(((call.at - start).total_seconds(), total))
    if spent:
        right.plot([t for t, _ in spent], [c for _, c in spent], color="tab:orange")
    right.set_ylabel("cost (USD)", color="tab:orange")
    return _png(fig)


def _lineage_plot(rows) -> str:
    fig, ax = plt.subplots(figsize=(7, 4))
    position = {r.id: (i, r.static_score or 0.0) for i, r in enumerate(rows, 1)}
    for r in rows:
        if r.parent in position:
            (x0, y0), (x1, y1) = position[r.parent], position[r.id]
            ax.plot([x0, x1], [y0, y1], color="grey", linewidth=0.7)
    for r in rows:
        x, y = position[r.id]
        ax.scatter([x], [y], color="tab:green" if r.origin == "seed" else "tab:blue", s=20, zorder=3)
    ax.set_xlabel("candidate (order evaluated)")
    ax.set_ylabel("static score")
    ax.set_title("lineage: each line joins a parent to its child", fontsize=9)
    return _png(fig)


def _category_plot(best, seeds) -> str:
    members = [("best", best), *[(f"seed {s.commit_message.removeprefix('seed ')}", s) for s in seeds]]
    categories = sorted({c for _, m in members for c in m.category_scores})
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / max(1, len(members))
    for i, (label, m) in enumerate(members):
        ax.bar([j + i * width for j in range(len(categories))], [m.category_scores.get(c, 0.0) for c in categories],
               width=width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(categories))], categories, rotation=20, fontsize=8)
    ax.set_ylabel("score on the evaluated questions")
    ax.legend(fontsize=8)
    return _png(fig)


def _stages_plot(best, seeds) -> str | None:
    """Attributed failures per category, stacked by stage, for the best and each seed; None if not attributed."""
    members = [(label, m) for label, m in [("best", best), *[(f"seed {s.commit_message.removeprefix('seed ')}", s)
                                                              for s in seeds]] if m.stage_counts]
    if not members:
        return None
    categories = sorted({c for _, m in members for c in m.stage_counts})
    fig, axes = plt.subplots(1, len(members), figsize=(2.6 * len(members) + 1, 3.2), sharey=True, squeeze=False)
    colours = {"answering": "tab:blue", "retrieval": "tab:orange", "storage": "tab:red", "not_written": "lightgrey"}
    for ax, (label, member) in zip(axes[0], members):
        bottom = [0] * len(categories)
        for stage, colour in colours.items():
            heights = [member.stage_counts.get(c, {}).get(stage, 0) for c in categories]
            ax.bar(range(len(categories)), heights, bottom=bottom, color=colour, label=stage)
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_xticks(range(len(categories)), categories, rotation=30, fontsize=7)
        ax.set_title(label, fontsize=8)
    axes[0][0].set_ylabel("failed items")
    axes[0][-1].legend(fontsize=7)
    return _png(fig)


def _utilisation_plot(rows) -> str:
    fig, ax = plt.subplots(figsize=(7, 2.5))
    start = min(r.finished_at.timestamp() - r.wall_seconds for r in rows)
    workers = sorted({(r.node_id[:8], r.worker_pid) for r in rows})
    for lane, worker in enumerate(workers):
        spans = [(r.finished_at.timestamp() - r.wall_seconds - start, r.wall_seconds)
                 for r in rows if (r.node_id[:8], r.worker_pid) == worker]
        ax.broken_barh(spans, (lane - 0.4, 0.8))
    ax.set_yticks(range(len(workers)), [f"{node} pid {pid}" for node, pid in workers], fontsize=7)
    ax.set_xlabel("wall time (s): evaluations per worker")
    return _png(fig)


def _population_map(run_dir: Path, members) -> PopulationMap | None:
    """The run's own (``structure.json``, computed over the Ray cluster at the end), else computed here from the
    population so far (a live or interrupted run)."""
    stored = run_dir / layout.STRUCTURE
    if stored.exists():
        return PopulationMap.model_validate_json(stored.read_text())
    config = load_run_config(run_dir / layout.CONFIG)
    index = StructureIndex(config.search.structure_level)
    for member in members:
        index.learn(member.id, member.source)
    return map_population(members, index, seed=config.search.seed)


def _map_section(found: PopulationMap | None, rows) -> str:
    if found is None:
        return "<p>(no program could be placed)</p>"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs, ys = [x for x, _ in found.coords], [y for _, y in found.coords]
    markers = "os^Dvp"
    for cluster in range(len(found.medoids)):
        chosen = [i for i, label in enumerate(found.labels) if label == cluster]
        points = ax.scatter([xs[i] for i in chosen], [ys[i] for i in chosen], c=[found.scores[i] for i in chosen],
                            cmap="viridis", vmin=min(found.scores), vmax=max(found.scores) or 1.0,
                            marker=markers[cluster % len(markers)], s=30, edgecolors="black", linewidths=0.3,
                            label=f"cluster {cluster + 1}")
        medoid = found.ids.index(found.medoids[cluster])
        ax.annotate(str(cluster + 1), (xs[medoid], ys[medoid]), fontsize=9, weight="bold",
                    xytext=(4, 4), textcoords="offset points")
    fig.colorbar(points, ax=ax, label="static score")
    ax.set_title(f"classical MDS of tree edit distances ({found.level} level); marker: cluster", fontsize=9)
    ax.legend(fontsize=7)
    messages = {r.id: r.commit_message for r in rows}
    table = ["<table><tr><th>cluster</th><th>programs</th><th>best</th><th>mean</th><th>medoid</th></tr>"]
    for cluster, medoid in enumerate(found.medoids):
        scores = [found.scores[i] for i, label in enumerate(found.labels) if label == cluster]
        table.append(f"<tr><td>{cluster + 1}</td><td>{len(scores)}</td><td>{max(scores):.3f}</td>"
                     f"<td>{sum(scores) / len(scores):.3f}</td><td><code>{medoid}</code> "
                     f"{html.escape(messages.get(medoid, ''))}</td></tr>")
    table.append("</table>")
    children = [r for r in rows if r.novelty_parent is not None]
    sample = (f"<p>the clusters and the map of a sample of {len(found.ids)} of the {found.programs} programs: the "
              "best half by static score and a seeded draw of the rest</p>"
              if found.programs and found.programs > len(found.ids) else "")
    novelty = (f"<p>mean distance between programs {found.mean_distance:.3f}; silhouette {found.silhouette:.2f}; "
               f"children's median distance to their parent "
               f"{sorted(r.novelty_parent for r in children)[len(children) // 2]:.3f}</p>" if children else "")
    return _png(fig) + sample + "".join(table) + novelty


def _pareto_section(config, split: Split, population: Population) -> str:
    """The members no other beats on every objective (search.pareto's), with their per-category static means:
    the parents ``parent_selection: pareto`` draws from, each weighted by the objectives it is best on."""
    members = population.members
    rule = config.search.pareto
    parents = ParetoParents(split.static, rule.objectives, rule.cost)
    front = sorted(parents.front(population), key=lambda entry: -entry.member.score)
    by_category = ParetoParents(split.static, "categories")
    categories = by_category.names
    used = ("the run drew its parents from it" if config.search.parent_selection == "pareto"
            else f"the run chose parents by {config.search.parent_selection}; shown for comparison")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in categories)
    rows = [f"<p>{len(front)} of {len(members)} programs on the front over every static "
            f"{'question' if rule.objectives == 'items' else 'category'}{' and the token cost' if rule.cost else ''} "
            f"({used}); best on: the objectives on which each has the population's best value, its weight</p>",
            f"<table><tr><th>program</th><th>static</th>{head}<th>best on</th><th>tokens</th><th>change</th></tr>"]
    best = {c: max(by_category.values(m)[i] for m in members) for i, c in enumerate(categories)}
    for entry in front:
        m = entry.member
        cells = "".join(f"<td>{'<b>' if v >= best[c] - 1e-12 else ''}{v:.3f}</td>"
                        for c, v in zip(categories, by_category.values(m)))
        rows.append(f"<tr><td><code>{m.id}</code></td><td>{m.score:.3f}</td>{cells}<td>{entry.best_on}</td>"
                    f"<td>{m.tokens}</td><td>{html.escape(m.commit_message[:80])}</td></tr>")
    rows.append("</table><p>bold: the population's best on that category's static questions</p>")
    return "".join(rows)


def _transfer_section(run_dir: Path) -> str | None:
    """The transfer matrix ``mstar-ray transfer`` wrote here, as a heat map with its numbers; None if absent."""
    path = run_dir / layout.TRANSFER
    if not path.exists():
        return None
    matrix = TransferMatrix.model_validate_json(path.read_text())
    values = [[float("nan") if s is None else s for s in row] for row in matrix.scores]
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(matrix.tasks), 0.9 + 0.45 * len(matrix.programs)))
    ax.imshow(values, cmap="viridis", vmin=0.0, vmax=max([s for row in matrix.scores for s in row if s is not None],
                                                        default=1.0) or 1.0, aspect="auto")
    for row, program in enumerate(matrix.programs):
        for column, score in enumerate(matrix.scores[row]):
            text = "error" if score is None else f"{score:.3f}" + (" *" if program.native == column else "")
            ax.text(column, row, text, ha="center", va="center", fontsize=8, color="white")
    ax.set_xticks(range(len(matrix.tasks)), [t.name for t in matrix.tasks], rotation=15, fontsize=8)
    ax.set_yticks(range(len(matrix.programs)), [p.label for p in matrix.programs], fontsize=8)
    ax.set_title("test score of each program on each task (* its own task)", fontsize=9)
    return _png(fig) + f"<pre>{html.escape(matrix.text())}</pre>"


def _interval(row) -> str:
    if row.static_low is None or row.static_high is None:
        return f"{row.static_score:.3f}"
    return f"{row.static_score:.3f} [{row.static_low:.3f}, {row.static_high:.3f}]"


def _seed_of(member_id: str, by_id: dict) -> str | None:
    current = by_id.get(member_id)
    while current is not None and current.parent is not None:
        current = by_id.get(current.parent)
    return current.id if current is not None else None


def build_report(run_dir: Path) -> str:
    all_rows = read_rows(run_dir, "candidates")
    screened = [r for r in all_rows if r.status == "screened_out"]  # no full evaluation: no static score to plot
    rows = [r for r in all_rows if r.status not in ("duplicate", "screened_out")]
    duplicates = len(all_rows) - len(rows) - len(screened)
    if not rows:
        raise InputError(f"{run_dir}: no candidate has been evaluated yet")
    calls = read_rows(run_dir, "llm_calls")
    config = load_run_config(run_dir / layout.CONFIG)
    state = restore(run_dir)
    by_id = {m.id: m for m in state.members}
    evaluated = [r for r in rows if r.status == "evaluated"]
    best_id = chosen(run_dir, state)[0].id
    best_row = next(r for r in evaluated if r.id == best_id)
    seed_rows = [r for r in evaluated if r.origin == "seed"]
    seed_id = _seed_of(best_row.id, by_id)
    diff = "".join(line + "\n" for line in unified_diff(by_id[seed_id].source, by_id[best_row.id].source, "seed.py",
                                                         "best.py").lines) if seed_id and seed_id != best_row.id else "(the best program is a seed)"
    nodes = {r.id: Node(id=r.id, parent=r.parent, origin=r.origin, commit_message=r.commit_message or "",
                        score=r.static_score, status=r.status) for r in rows + screened}

    def source(program: str | None) -> str | None:
        if program in by_id:
            return by_id[program].source
        try:
            return load_source(run_dir, program) if program else None
        except (OSError, ValueError):
            return None

    summary_path = run_dir / layout.SUMMARY
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    facts = [f"{len(rows)} candidates evaluated ({len(seed_rows)} seeds), {state.discarded} discarded, {state.violations} violations",
             f"best static score {_interval(best_row)} ({html.escape(best_row.origin)}: {html.escape(best_row.commit_message)})",
             f"cost ${sum(c.cost_usd for c in calls):.4f}; {sum(c.cache_hit for c in calls)} of {len(calls)} LLM requests from the cache",
             f"{duplicates} children not evaluated again (identical or structurally identical to a program already queued)",
             *(f"scored by {html.escape(metric)}" for metric in metrics(run_dir))]
    if config.search.cascade is not None:
        passed = [r for r in evaluated if r.origin != "seed" and r.screen_score is not None]
        facts.append(f"cascade (rule {config.search.cascade.rule}): {len(screened)} children screened out after the "
                     f"slice, {len(passed)} went on to a full evaluation")
    formats = Counter(r.edit_format for r in rows if r.origin == "reflection")
    if formats:
        tolerated = sum(1 for r in rows if r.tolerances)
        facts.append("reflections by edit format: " + ", ".join(f"{k} {v}" for k, v in sorted(formats.items()))
                     + f"; {tolerated} needed a tolerant reading")
    split = Split.model_validate_json((run_dir / layout.SPLIT).read_text())
    if split.static_evidence is not None:
        facts.append(f"{len(split.train_texts)} texts written per search evaluation (plus the rotating questions' "
                     f"evidence), holding {split.static_evidence:.0%} of the static questions' evidence")
    if summary:
        facts.append(f"test: {html.escape(tested(summary, ', '))}; stopped: {html.escape(summary['stop_reason'])}")
        if summary.get("selection"):
            facts.append(f"chosen by {summary['selection']['rule']}: {html.escape(summary['selection']['how'])}")
    sections = [
        ("Scores", _scores_plot(rows)),
        ("Wall time and cost", _time_cost_plot(rows, calls)),
        ("Lineage", _lineage_plot(evaluated)),
        ("Per category: the best against the seeds", _category_plot(best_row, seed_rows)),
        ("Worker utilisation", _utilisation_plot(rows + screened)),
        ("Pareto front", _pareto_section(config, split, state.population)),
        ("Structural clusters", _map_section(_population_map(run_dir, state.members), rows)),
        ("The best program's diff from its seed", f"<pre>{html.escape(diff)}</pre>"),
        ("Lineage tree", lineage_tree(nodes, best_id)),
        ("Changes: each candidate against its parent", diffs_section(nodes, best_id, source)),
        (f"The returned program ({best_id}, best.py)", source_html(by_id[best_id].source)),
    ]
    stages = _stages_plot(best_row, seed_rows)
    if stages is not None:
        sections.insert(4, ("Where the failures went wrong: storage, retrieval or answering", stages))
    transfer = _transfer_section(run_dir)
    if transfer is not None:
        sections.append(("Transfer to other tasks (mstar-ray transfer)", transfer))
    body = "".join(f"<h2>{title}</h2>{content}" for title, content in sections)
    items = "".join(f"<li>{fact}</li>" for fact in facts)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>mstar-ray run {html.escape(run_dir.name)}</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}pre{background:#f6f6f6;padding:1em;"
            "overflow-x:auto;font-size:80%}img{max-width:100%}td,th{padding:0 .6em;text-align:left}" + STYLE +
            "</style></head><body>"
            f"<h1>Run {html.escape(str(run_dir))}</h1><p>written {datetime.now().isoformat(timespec='seconds')}</p>"
            f"<ul>{items}</ul>{body}</body></html>")
