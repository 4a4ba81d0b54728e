"""What ``mstar-ray run`` prints when a search ends: a short account for a person, read from the run's
``summary.json`` (``--json`` prints that file instead). It answers what a user asks at the end of a run:
which program came back and why, how it scores against the best seed on the static and the held-out test
questions, what the search did and cost, and where its files are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mstar_ray.inspect.figures import plural, score_text
from mstar_ray.runlog import layout
from mstar_ray.terminal import printable


def summary_of(run_dir: Path) -> dict[str, Any]:
    path = run_dir / layout.SUMMARY
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} has no {layout.SUMMARY}: the run did not finish")
    summary: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return summary


def _member_line(label: str, member: dict[str, Any]) -> str:
    return (f"  {label:<11}{member['id']:<18}{score_text(member['static_score'], member.get('static_interval')):<24}"
            f"{score_text(member.get('test_score'), member.get('test_interval'))}")


def run_summary_text(run_dir: Path, summary: dict[str, Any] | None = None) -> str:
    s = summary if summary is not None else summary_of(run_dir)
    best, seed, selection = s["best"], s["best_seed"], s["selection"]
    message = printable(best.get("commit_message") or "", lines=False)
    lines = [
        f"returned  {best['id']} ({message if best['origin'] == 'seed' else best['origin'] + ': ' + message})",
        f"chosen by {selection['rule']}: {printable(selection['how'], lines=False)}",
        "",
        f"  {'':<11}{'program':<18}{'static [95% interval]':<24}test [95% interval]   ({s['metric']})",
        _member_line("returned", best),
    ]
    if seed["id"] != best["id"]:
        lines.append(_member_line("best seed", seed))
    else:
        lines.append("  (the returned program is the best seed)")
    if best.get("test_score") is None:
        lines.append("  no test: the run has no held-out questions, or its budget ran out before the test")
    categories = best.get("test_categories") or {}
    if len(categories) > 1:
        seed_categories = seed.get("test_categories") or {}
        lines.append("  test by category: " + ", ".join(
            f"{c} {v:.3f}" + (f" (seed {seed_categories[c]:.3f})" if c in seed_categories and seed["id"] != best["id"]
                              else "") for c, v in sorted(categories.items())))
    lines += [
        "",
        f"search    {s['candidates_evaluated']} candidates evaluated · {s['discarded']} discarded · "
        f"{plural(s['violations'], 'violation')} · {plural(s.get('duplicates', 0), 'duplicate')} · "
        f"{s.get('screened_out', 0)} screened out",
        f"stopped   {s['stop_reason']}",
        f"cost      ${s.get('cost_usd', 0.0):.4f}, {s.get('tokens', 0)} tokens · wall time {s['wall_seconds']:.1f} s",
        f"program   {run_dir / layout.BEST}",
        f"summary   {run_dir / layout.SUMMARY} (--json prints it)",
        f"report    mstar-ray report {run_dir}  (writes {run_dir / 'report.html'})",
    ]
    return "\n".join(lines)


def transfer_text(out: Path, run_dirs: list[str], *, as_json: bool = False) -> str:
    """The end of ``mstar-ray transfer``: the matrix as a table and where it was written (or transfer.json)."""
    from mstar_ray.runlog.transfer_matrix import TransferMatrix

    data = (out / layout.TRANSFER).read_text(encoding="utf-8")
    if as_json:
        return data
    matrix = TransferMatrix.model_validate_json(data)
    places = ", ".join(str(Path(d) / layout.TRANSFER) for d in run_dirs)
    return (f"{matrix.text()}\n\nmatrix    {out / layout.TRANSFER} (--json prints it), and {places}\n"
            f"report    mstar-ray report RUN_DIR draws it for each run")
