"""One run config searched over several settings: the returned program against the best seed, per run.

Each ``--set KEY=V1,V2,...`` gives a config key (dotted, as in the YAML) and the values to try; every
combination is a full ``mstar-ray run`` of the config with those keys changed, in its own run directory under
``--out`` (a finished run is read again, not redone; an interrupted one is resumed). Then one row per run: what
was returned (an evolved program or the best seed) and the rule that chose it, its static and test score
against the best seed's on the same questions, and a count of the runs that returned an evolved program and
of those whose program lost to its best seed on test.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/search_table.py experiments/quickstart.yaml \\
        --set task.seed=100,101,102,103,104 --out /tmp/worlds
    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/search_table.py experiments/locomo-offline.yaml \\
        --set task.conversation=0,1,2,3,4,5,6,7 --out /tmp/locomo
    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/search_table.py experiments/quickstart.yaml \\
        --set search.reflector=offline,offline-random --set search.seed=0,1,2 --out /tmp/reflectors
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MSTAR_RAY = Path(sys.executable).with_name("mstar-ray")


def settings(pairs: list[str]) -> list[dict[str, object]]:
    """Every combination of the ``KEY=V1,V2`` pairs, each value read as YAML (numbers stay numbers)."""
    axes = []
    for pair in pairs:
        key, _, values = pair.partition("=")
        if not key or not values:
            raise SystemExit(f"--set {pair!r}: expected KEY=V1,V2,...")
        axes.append([(key, yaml.safe_load(v)) for v in values.split(",")])
    return [dict(combo) for combo in itertools.product(*axes)]


def with_keys(config: dict, keys: dict[str, object]) -> dict:
    out = json.loads(json.dumps(config))
    for dotted, value in keys.items():
        node = out
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def run_name(keys: dict[str, object]) -> str:
    return "_".join(f"{k.split('.')[-1]}-{v}" for k, v in keys.items()) or "base"


def run(config_path: Path, keys: dict[str, object], out: Path) -> Path:
    run_dir = out / run_name(keys)
    if (run_dir / "summary.json").is_file():
        return run_dir
    config = with_keys(yaml.safe_load(config_path.read_text()), keys)
    path = out / f"{run_name(keys)}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    command = ([str(MSTAR_RAY), "run", "--resume", str(run_dir)] if run_dir.exists()
               else [str(MSTAR_RAY), "run", str(path), "--run-dir", str(run_dir)])
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return run_dir


def row(keys: dict[str, object], run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    best, seed = summary["best"], summary["best_seed"]
    return {"run": run_name(keys), "evolved": best["origin"] != "seed", "chosen_by": summary.get("selection", {}).get("rule", ""),
            "static": best["static_score"], "seed_static": seed["static_score"],
            "test": best.get("test_score"), "seed_test": seed.get("test_score"),
            "candidates": summary.get("candidates_evaluated"), "run_dir": str(run_dir)}


def render(rows: list[dict]) -> str:
    lines = [f"{'run':<28} {'returned':<9} {'chosen by':<13} {'static':>6} {'seed':>6} {'test':>6} {'seed':>6} {'lead':>7}"]
    for r in rows:
        lead = r["test"] - r["seed_test"] if r["test"] is not None and r["seed_test"] is not None else float("nan")
        lines.append(f"{r['run']:<28} {'evolved' if r['evolved'] else 'seed':<9} {r['chosen_by']:<13} {r['static']:>6.3f} "
                     f"{r['seed_static']:>6.3f} {r['test']:>6.3f} {r['seed_test']:>6.3f} {lead:>+7.3f}")
    evolved = [r for r in rows if r["evolved"]]
    lost = [r for r in evolved if r["test"] < r["seed_test"]]
    won = [r for r in evolved if r["test"] > r["seed_test"]]
    lines.append(f"{len(evolved)} of {len(rows)} runs returned an evolved program; on test {len(won)} of them beat "
                 f"their best seed, {len(lost)} lost to it")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2", help="a config key and its values")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for keys in settings(args.set):
        rows.append(row(keys, run(args.config.resolve(), keys, args.out)))
        print(f"{rows[-1]['run']}: done", file=sys.stderr)
    print(json.dumps(rows, indent=1) if args.json else render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
