"""The helper process that hosts one environment (``python -m mstar_ray.envs.worker KIND``): one JSON request
per line on stdin, one JSON reply per line on the reply channel (the original stdout).

Everything the engine prints goes to stderr (stdout is pointed there), so a reply line is never mixed with
an engine's output. A reply is ``{"value": ...}`` or ``{"error": KIND, "message": ...}`` where KIND is
``unavailable`` (this machine cannot run the engine), ``data`` (its data is missing), ``input`` (a game or
parameter the engine refuses) or ``failure`` (anything else: the engine did not start, or broke). The process ends when its
parent does (stdin closes, or the parent is gone), taking its process group, the engine's JVM included.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any
from typing import cast

from mstar_ray.envs import make
from mstar_ray.envs.base import EnvDataMissing, Environment, EnvUnavailable, GameSpec
from mstar_ray.envs.base import EnvKind

PARENT_CHECK_S = 1.0
TRACEBACK_CHARS = 2000


def serve(env: Environment, op: str, args: dict[str, Any]) -> Any:
    if op == "games":
        return env.games(GameSpec.model_validate(args["game"]))
    if op == "reset":
        return env.reset(GameSpec.model_validate(args["game"])).model_dump()
    if op == "step":
        return env.step(str(args["action"])).model_dump()
    if op == "expert_action":
        return env.expert_action()
    raise ValueError(f"unknown environment request {op!r}")


class _StartFailed(Exception):
    """The engine itself did not start (a JVM that cannot initialise, say): never the request's fault."""


def _start(kind: EnvKind) -> Environment:
    try:
        return make(kind)
    except EnvUnavailable:
        raise
    except Exception as exc:
        raise _StartFailed(f"the engine could not start: {type(exc).__name__}: {exc}") from exc


def _orphan_watch(parent: int) -> None:
    """A hung engine never reads stdin again, so its end-of-file cannot end us: watch the parent instead."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os.killpg(0, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    kind = cast(EnvKind, (argv if argv is not None else sys.argv[1:])[0])  # EnvProcess starts it with its EnvKind
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    threading.Thread(target=_orphan_watch, args=(os.getppid(),), daemon=True).start()
    env: Environment | None = None
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if env is None:
                env = _start(kind)
            reply: dict[str, Any] = {"value": serve(env, request["op"], request.get("args", {}))}
        except EnvUnavailable as exc:
            reply = {"error": "unavailable", "message": str(exc)}
        except EnvDataMissing as exc:
            reply = {"error": "data", "message": str(exc)}
        except _StartFailed as exc:
            reply = {"error": "failure", "message": str(exc)}
        except ValueError as exc:
            reply = {"error": "input", "message": str(exc)}
        except Exception as exc:  # the engine broke: the caller kills this process and starts a fresh one
            reply = {"error": "failure", "message": f"{type(exc).__name__}: {exc}",
                     "traceback": traceback.format_exc()[-TRACEBACK_CHARS:]}
        replies.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
