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
from mstar_ray.inspect.figures import cache_text, plural, shortened  # noqa: E402
from mstar_ray.inspect.page import inline_views  # noqa: E402
from mstar_ray.inspect.snapshot import run_snapshot  # noqa: E402
from mstar_ray.inspect.code_view import STYLE, Node, diffs_section, lineage_tree, source_html  # noqa: E402
from mstar_ray.inspect.status import metrics, run_config_of, tested  # noqa: E402
from mstar_ray.line_diff import unified_diff  # noqa: E402
from mstar_ray.run_config import load_run_config  # noqa: E402
from mstar_ray.runlog import layout  # noqa: E402
from mstar_ray.runlog.reader import read_rows  # noqa: E402
from mstar_ray.runlog.sources import load_source  # noqa: E402
from mstar_ray.runlog.transfer_matrix import TransferMatrix  # noqa: E402
from mstar_ray.search.pareto import TIE, ParetoParents  # noqa: E402
from mstar_ray.search.population import Population  # noqa: E402
from mstar_ray.search.split import Split  # noqa: E402
from mstar_ray.state.reflector_yield import run_arms, yield_lines  # noqa: E402
from mstar_ray.state.replay import restore  # noqa: E402
from mstar_ray.structure.population_map import PopulationMap, map_population  # noqa: E402
from mstar_ray.structure.index import StructureIndex  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from mstar_ray.run_config import RunConfig  # noqa: E402
from mstar_ray.runlog.schemas import CandidateRow, LLMCallRow  # noqa: E402
from mstar_ray.search.population import Member  # noqa: E402


def _png(fig: Figure) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return '<img src="data:image/png;base64,' + base64.b64encode(buffer.getvalue()).decode() + '">'


def _time_cost_plot(rows: list[CandidateRow], calls: list[LLMCallRow]) -> str:
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


def _category_plot(best: CandidateRow, seeds: list[CandidateRow]) -> str:
    members = [("returned", best), *[(f"seed {s.commit_message.removeprefix('seed ')}", s) for s in seeds
                                     if s.id != best.id]]
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


def _stages_plot(best: CandidateRow, seeds: list[CandidateRow]) -> str | None:
    """Attributed failures per category, stacked by stage, for the best and each seed; None if not attributed."""
    members = [(label, m) for label, m in [("returned", best), *[(f"seed {s.commit_message.removeprefix('seed ')}", s)
                                                                  for s in seeds if s.id != best.id]] if m.stage_counts]
    if not members:
        return None
    categories = sorted({c for _, m in members for c in m.stage_counts})
    fig, axes = plt.subplots(1, len(members), figsize=(2.6 * len(members) + 1, 3.2), sharey=True, squeeze=False)
    colours = {"answering": "tab:blue", "retrieval": "tab:orange", "storage": "tab:red", "not_written": "lightgrey"}
    names = {"not_written": "evidence never written"}
    for ax, (label, member) in zip(axes[0], members):
        bottom = [0] * len(categories)
        for stage, colour in colours.items():
            heights = [member.stage_counts.get(c, {}).get(stage, 0) for c in categories]
            ax.bar(range(len(categories)), heights, bottom=bottom, color=colour, label=names.get(stage, stage))
            bottom = [b + h for b, h in zip(bottom, heights)]
        ax.set_xticks(range(len(categories)), categories, rotation=30, fontsize=7)
        ax.set_title(label, fontsize=8)
    axes[0][0].set_ylabel("failed items")
    fig.legend(*axes[0][0].get_legend_handles_labels(), fontsize=7, loc="upper center", ncols=4,
               bbox_to_anchor=(0.5, -0.12), frameon=False)  # below the bars and their labels, never over one
    return _png(fig)


def _utilisation_plot(rows: list[CandidateRow]) -> str:
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


def _population_map(run_dir: Path, members: list[Member]) -> PopulationMap | None:
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


def _map_section(found: PopulationMap | None, rows: list[CandidateRow], returned: str) -> str:
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
        medoid_at = found.ids.index(found.medoids[cluster])
        ax.annotate(str(cluster + 1), (xs[medoid_at], ys[medoid_at]), fontsize=9, weight="bold",
                    xytext=(4, 4), textcoords="offset points")
    if returned in found.ids:
        at = found.ids.index(returned)
        ax.scatter([xs[at]], [ys[at]], marker="*", s=260, facecolors="none", edgecolors="tab:orange", linewidths=1.8,
                   label="returned", zorder=4)
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
    children = [r.novelty_parent for r in rows if r.novelty_parent is not None]
    sample = (f"<p>the clusters and the map of a sample of {len(found.ids)} of the {found.programs} programs: the "
              "best half by static score and a seeded draw of the rest</p>"
              if found.programs and found.programs > len(found.ids) else "")
    novelty = (f"<p>mean distance between programs {found.mean_distance:.3f}; silhouette {found.silhouette:.2f}; "
               f"children's median distance to their parent "
               f"{sorted(children)[len(children) // 2]:.3f}</p>" if children else "")
    return _png(fig) + sample + "".join(table) + novelty


def _pareto_section(config: RunConfig, split: Split, population: Population) -> str:
    """The members no other beats on every objective (search.pareto's), with their per-category static means:
    the parents ``parent_selection: pareto`` draws from, each weighted by the objectives it is best on."""
    members = population.members
    rule = config.search.pareto
    parents = ParetoParents(split.static, rule.objectives, rule.cost)
    front = sorted(parents.front(population), key=lambda entry: -entry.member.score)
    by_category = ParetoParents(split.static, "categories")
    by_category.values(members[0])  # the categories are fixed by the first member placed
    categories = by_category.names
    used = ("the run drew its parents from it" if config.search.parent_selection == "pareto"
            else f"the run chose parents by {config.search.parent_selection}; shown for comparison")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in categories)
    rows = [f"<p>{len(front)} of {len(members)} programs on the front over every static "
            f"{'question' if rule.objectives == 'items' else 'category'}{' and the token cost' if rule.cost else ''} "
            f"({used}); best on: the objectives on which each has the population's best value, its weight</p>",
            f"<table><tr><th>program</th><th>static</th>{head}<th>best on</th><th>tokens</th><th>change</th></tr>"]
    best = {c: max(by_category.values(m)[i] for m in members) for i, c in enumerate(categories)}
    tops = [max(values) for values in zip(*(entry.values for entry in front))] if front else []
    for entry in front:
        m = entry.member
        cells = "".join(f"<td>{'<b>' if v >= best[c] - 1e-12 else ''}{v:.3f}</td>"
                        for c, v in zip(categories, by_category.values(m)))
        rows.append(f"<tr><td><code>{m.id}</code></td><td>{m.score:.3f}</td>{cells}"
                    f"<td>{_best_on(parents.names, entry.values, tops)}</td><td>{m.tokens}</td>"
                    f"<td class='msg' title='{html.escape(m.commit_message, quote=True)}'>"
                    f"{html.escape(shortened(m.commit_message, 120))}</td></tr>")
    rows.append("</table><p>bold: the population's best mean score on that category's static questions (a category "
                "column)</p>")
    return "".join(rows)


def _best_on(names: list[str], values: tuple[float, ...], tops: list[float]) -> str:
    """The objectives on which a front member holds the population's best value, named (its weight is their
    count); a long list of questions is cut to its first few."""
    won = [name for name, value, top in zip(names, values, tops) if value >= top - TIE]
    shown = ", ".join(html.escape(name) for name in won[:6]) + (", …" if len(won) > 6 else "")
    return f"{len(won)} of {len(names)}: {shown}" if won else f"0 of {len(names)}"


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


def _seed_of(member_id: str, by_id: dict[str, Member]) -> str | None:
    current = by_id.get(member_id)
    while current is not None and current.parent is not None:
        current = by_id.get(current.parent)
    return current.id if current is not None else None


def build_report(run_dir: Path) -> str:
    run_config_of(run_dir)  # "not a run directory" before anything else is read
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
    snap = run_snapshot(run_dir, state)  # the run is replayed once, here and for the page alike
    best_id = snap["returned"]["id"]
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
    returned, spent = snap["returned"], snap["cost"]
    facts = [f"{plural(len(rows), 'candidate')} evaluated ({plural(len(seed_rows), 'seed')}), {state.discarded} discarded, "
             f"{plural(state.violations, 'violation')}",
             f"{'returned' if returned['final'] else 'best so far'} <code>{best_id}</code>, static score "
             f"{returned['score_text']} ({html.escape(best_row.origin)}: {html.escape(best_row.commit_message)})",
             f"cost ${spent['usd']:.4f}; {cache_text(spent['cache_hits'], spent['requests'])}",
             f"{plural(duplicates, 'child', 'children')} not evaluated again (identical or structurally identical to a "
             "program already queued)",
             *(f"scored by {html.escape(metric)}" for metric in metrics(run_dir))]
    if state.reflector_models:  # an ensemble of reflector models: spend and yield per model
        facts += [f"reflector {html.escape(line)}" for line in yield_lines(run_arms(config, state))]
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
    head, views = inline_views(snap, ["scores", "lineage"])
    sections = [
        ("", views),
        ("Wall time and cost", _time_cost_plot(rows, calls)),
        ("Per category: the returned program against the seeds", _category_plot(best_row, seed_rows)),
        ("Worker utilisation", _utilisation_plot(rows + screened)),
        ("Pareto front", _pareto_section(config, split, state.population)),
        ("Structural clusters", _map_section(_population_map(run_dir, state.members), rows, best_id)),
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
    body = "".join((f"<h2>{title}</h2>" if title else "") + content for title, content in sections)
    items = "".join(f"<li>{fact}</li>" for fact in facts)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>mstar-ray run {html.escape(run_dir.name)}</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}pre{background:#f6f6f6;padding:1em;"
            "overflow-x:auto;font-size:80%}img{max-width:100%}td,th{padding:0 .6em;text-align:left}" + STYLE +
            "</style>" + head + "</head><body>"
            f"<h1>Run {html.escape(str(run_dir))}</h1><p>written {datetime.now().isoformat(timespec='seconds')}</p>"
            f"<ul>{items}</ul>{body}</body></html>")
