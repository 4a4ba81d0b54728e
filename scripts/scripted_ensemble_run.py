"""A whole `mstar-ray run` (local Ray, reflector actors, sandboxed evaluations, the offline task agent) whose
reflector is an ensemble of two scripted OpenAI-compatible models of different quality and price, with
evolving instructions on; prints the spend and yield per model as `mstar-ray status` shows them.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/scripted_ensemble_run.py --out /tmp/ensemble [--candidates 12]

good-cheap adds a sentence to the program's response instruction (a new child every time) at 1/2 USD per
million prompt/completion tokens; poor-dear gives the parent back unchanged (every attempt fails its check, the
reflection is discarded) at ten times the price. The scripted server counts 10 prompt and 5 completion tokens
per request. Both answer the meta-step of evolving instructions with a fixed text.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.scripted_server import ScriptedServer  # noqa: E402
from tests.test_reflector_ensemble import idle_model, improving_model  # noqa: E402

MSTAR_RAY = Path(sys.executable).with_name("mstar-ray")
PRICES = {"good-cheap": {"input_per_mtok": 1.0, "output_per_mtok": 2.0},
          "poor-dear": {"input_per_mtok": 10.0, "output_per_mtok": 20.0}}


def with_meta(model):
    def reply(messages):
        if messages[0]["content"].startswith("You improve the instruction"):
            return "Make one targeted change where most failures went wrong; say which failure it addresses."
        return model(messages)
    return reply


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="a directory for the config and the run")
    parser.add_argument("--candidates", type=int, default=12)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with ScriptedServer(reply_for=with_meta(improving_model())) as good, \
            ScriptedServer(reply_for=with_meta(idle_model)) as poor:
        def endpoint(server: ScriptedServer, model: str) -> dict:
            return {"base_url": server.base_url, "model": model, "edit_format": "file", "timeout_s": 30,
                    "max_retries": 0, "max_tokens": 4000, "max_concurrency": 4}
        config = {
            "task": {"name": "synthetic", "seed": 1},
            "split": {"static_size": 12, "rotating_size": 3, "train_ratio": 2.0, "confirmation_size": 4},
            "search": {"max_candidates": args.candidates, "reflections_in_flight": 1, "evaluations_in_flight": 1,
                       "reflector": "llm", "guidance": {"size": 3, "rewrite_every": 4}},
            "llm": {"reflector": [endpoint(poor, "poor-dear"), endpoint(good, "good-cheap")], "prices": PRICES,
                    "embedding": {"kind": "hashing"}},
        }
        path = args.out / "ensemble.yaml"
        path.write_text(yaml.safe_dump(config))
        run = subprocess.run([str(MSTAR_RAY), "run", str(path), "--run-dir", str(args.out / "run")])
        if run.returncode != 0:
            return run.returncode
        print(f"requests: good-cheap {good.requests}, poor-dear {poor.requests}")
    status = subprocess.run([str(MSTAR_RAY), "status", str(args.out / "run")], capture_output=True, text=True)
    print("\n".join(line for line in status.stdout.splitlines() if line.startswith(("reflector", "cost"))))
    return status.returncode


if __name__ == "__main__":
    sys.exit(main())
