"""Which memory programs carry state from one read() to the next? Each program is evaluated offline twice on
the same task, its questions asked in item order and then in reverse; a program whose read() changes nothing a
later read sees returns the same context for every question in both orders. A program listed as carrying state
may score differently when each read sees only the post-write memory (issue 42's readers); the others score the
same, which the third evaluation, with readers (``evaluation.readers``), shows beside how its reads ran. The test is one-sided: order-independent contexts on these questions do not prove a program never
carries state.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/read_state_audit.py [PROGRAMS_DIR ...] [--seeds]
        [--conversation 0] [--limit 24] [--texts 12] [--embedder hashing|minilm] [--data PATH]

``--seeds`` adds the seed library; PROGRAMS_DIR holds ``<id>.py`` programs (e.g. the M* reference's LoCoMo
programs, extracted by ``scripts/proxy_agreement.py --extract-only``).
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar_ray.actors.wiring import RoleClients  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.contract import ContractError  # noqa: E402
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings  # noqa: E402
from mstar_ray.results import EvalConcurrency  # noqa: E402
from mstar_ray.seeds import LIBRARY  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402


# Reads in the program's own process, in item order (evaluation.readers = 1): where state can carry over.
IN_ORDER = EvalConcurrency(in_flight=1, episodes=1, readers=1)
FROM_SNAPSHOT = EvalConcurrency(in_flight=1, episodes=1)  # each read in a reader forked after the writes
MUTATORS = {"append", "extend", "insert", "update", "add", "pop", "remove", "clear", "setdefault", "upsert",
            "delete", "discard", "popitem", "sort", "reverse", "commit", "executemany", "executescript", "modify"}
SQL_WRITES = ("insert", "update", "delete", "create", "drop", "replace", "alter")


def writes_in_read(source: str) -> list[str]:
    """What read() (and the KnowledgeBase methods it reaches through self) may change: assignments to self's
    attributes, mutating calls on them, SQL that writes. A static hint beside the dynamic test, not a proof."""
    tree = ast.parse(source)
    kb = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KnowledgeBase"), None)
    methods = {f.name: f for f in (kb.body if kb else []) if isinstance(f, ast.FunctionDef)}
    seen, todo, found = set(), ["read"], []
    def on_self(node: ast.AST) -> ast.Attribute | None:
        """``self.x`` when ``node`` is ``self.x`` or reached from it by attributes, subscripts and calls."""
        while isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                return node
            node = node.func if isinstance(node, ast.Call) else node.value
        return None

    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        for node in ast.walk(methods[name]):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    root = on_self(target)
                    if root is not None:
                        found.append(f"{name}:{node.lineno} self.{root.attr} =")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                attr, owner = node.func.attr, node.func.value
                if isinstance(owner, ast.Name) and owner.id == "self":
                    todo.append(attr)
                elif attr in MUTATORS and on_self(owner) is not None:
                    found.append(f"{name}:{node.lineno} {ast.unparse(owner)}.{attr}()")
                elif attr == "execute" and node.args and isinstance(node.args[0], ast.Constant) and \
                        str(node.args[0].value).strip().lower().startswith(SQL_WRITES):
                    found.append(f"{name}:{node.lineno} SQL {str(node.args[0].value).split()[0].upper()}")
    return found


def programs(args: argparse.Namespace) -> dict[str, str]:
    found = {f"seed:{seed.name}": seed.path.read_text(encoding="utf-8") for seed in LIBRARY} if args.seeds else {}
    for folder in args.programs:
        for path in sorted(folder.glob("*.py")):
            found[f"{folder.name}:{path.stem}"] = path.read_text(encoding="utf-8")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", type=Path, nargs="*")
    parser.add_argument("--seeds", action="store_true")
    parser.add_argument("--conversation", type=int, default=0)
    parser.add_argument("--limit", type=int, default=24)
    parser.add_argument("--texts", type=int, default=12)
    parser.add_argument("--embedder", choices=("hashing", "minilm"), default="hashing")
    parser.add_argument("--data", default=None)
    args = parser.parse_args()
    task = load_task("locomo", conversation=args.conversation, limit=args.limit, data=args.data)
    task = task.model_copy(update={"texts": task.texts[:args.texts]})
    roles = RoleClients(LLMSettings(embedding=EmbeddingConfig(kind=args.embedder)))
    backend, embedder = roles.backend(), roles.embedder()
    carrying, same, failed, writers, snapshot, serial = [], [], [], [], [], []
    print(f"{len(task.texts)} texts, {len(task.items)} questions, offline, {args.embedder} embeddings")
    for name, source in programs(args).items():
        started = time.monotonic()
        try:
            forward = evaluate(source, task, backend, embedder, concurrency=IN_ORDER)
            backward = evaluate(source, task, backend, embedder, items=list(reversed(task.items)), concurrency=IN_ORDER)
        except ContractError as exc:
            failed.append(name)
            print(f"{name}: contract: {exc}")
            continue
        if forward.violation or backward.violation:
            failed.append(name)
            print(f"{name}: violation {(forward.violation or backward.violation).kind}")
            continue
        forked = evaluate(source, task, backend, embedder, concurrency=FROM_SNAPSHOT)
        by_id = {r.id: r.context for r in backward.results}
        differ = [r.id for r in forward.results if r.context != by_id.get(r.id)]
        (carrying if differ else same).append(name)
        reads = forked.sandbox.reads if forked.sandbox else None
        (snapshot if reads == "forked" else serial).append(name)
        writes = writes_in_read(source)
        print(f"{name}: {'CARRIES STATE' if differ else 'same contexts'} ({len(differ)}/{len(forward.results)} "
              f"questions differ); score in order {forward.score:.3f}, reversed {backward.score:.3f}, with "
              f"readers {forked.score:.3f} (reads: {reads}; {forward.wall_seconds:.1f} s in order, "
              f"{forked.wall_seconds:.1f} s with readers){' SCORE MOVED' if forked.score != forward.score else ''}; read() may "
              f"change: {', '.join(writes[:4]) + (' ...' if len(writes) > 4 else '') if writes else 'nothing'} "
              f"[{time.monotonic() - started:.0f} s]", flush=True)
        if writes:
            writers.append(name)
    print(f"\ncarry state between reads ({len(carrying)}): {', '.join(carrying) or 'none'}")
    print(f"same contexts in both orders ({len(same)}); failed ({len(failed)}): {', '.join(failed) or 'none'}")
    print(f"read() may change state, statically ({len(writers)}): {', '.join(writers) or 'none'}")
    print(f"reads from forked readers ({len(snapshot)}): {', '.join(snapshot) or 'none'}")
    print(f"reads in the program's process ({len(serial)}): {', '.join(serial) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
