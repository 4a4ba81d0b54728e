"""What a real reflector model does with real reflection requests: every reply classified and kept.

Parents are the seeds and offline mutations of them (``bench_programs.seeds_and_mutants``), each evaluated
with the offline task agent on LoCoMo (``--conversation``, ``--questions`` questions, the ``--texts`` texts
that cover them, chosen as the search chooses its training texts) for real failure cases. Each parent is
reflected on ``--rounds`` times in a row; like the driver, every later reflection carries the notes of the
ones before it (a discard's last error, a duplicate, a child's offline score) and the ids of every program
seen so far. Every reply (the first attempt and each repair) is read, checked and smoke-tested as in a run
and classified: valid child, no change, already evaluated, not Python, contract, smoke test...

Each reply is also compared with the worked example that the prompt shows: a reply whose definition is
at least ``COPY_SIMILARITY`` similar to the example's is a copy. A "no change" reply whose code does
differ from the parent's same-named definition would be a merge bug; they are counted and listed.

Every prompt and reply goes to ``--out`` (JSON lines), to be read.

    .venv/bin/python scripts/bench_reflections.py --url http://127.0.0.1:8080/v1 --model NAME \\
        [--parents 6] [--rounds 2] [--repairs 1] [--out /tmp/reflections.jsonl]
    .venv/bin/python scripts/bench_reflections.py --smollm2     # the test model, for the mechanics
    .venv/bin/python scripts/bench_reflections.py --reclassify /tmp/reflections.jsonl  # the same replies, today's code
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import random
import re
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_edit_formats import model_arguments, reply_kind, with_server  # noqa: E402
from bench_programs import seeds_and_mutants  # noqa: E402
from mstar_ray.agent.evaluation import evaluate  # noqa: E402
from mstar_ray.agent.offline import OfflineBackend  # noqa: E402
from mstar_ray.embedding.hashing import HashingEmbedder  # noqa: E402
from mstar_ray.llm.cache import MemoryCache  # noqa: E402
from mstar_ray.llm.client import LLMClient  # noqa: E402
from mstar_ray.llm.endpoint import ChatEndpoint, EndpointConfig  # noqa: E402
from mstar_ray.program_id import program_id  # noqa: E402
from mstar_ray.reflect.edit_formats import EDIT_FORMATS, read_edit  # noqa: E402
from mstar_ray.reflect.function_edit import EditError  # noqa: E402
from mstar_ray.reflect.one_shot import LLMReflector  # noqa: E402
from mstar_ray.reflect.reflector import Child, check_child  # noqa: E402
from mstar_ray.reflect.reply import ReplyError, parse_reply  # noqa: E402
from mstar_ray.reflect.request import LineageEntry, ReflectionRequest, sample_cases  # noqa: E402
from mstar_ray.reflect.smoke import smoke_test  # noqa: E402
from mstar_ray.reflect.v4a import PatchError  # noqa: E402
from mstar_ray.search.split import covering_texts  # noqa: E402
from mstar_ray.tasks.model import Task  # noqa: E402
from mstar_ray.families.task_registry import load_task  # noqa: E402

COPY_SIMILARITY = 0.8
# The fixed example the function prompt showed before issue 15, whose children copied it.
OLD_EXAMPLE = '''def read(self, query: Query) -> str:
    found = self.collection.query(query_texts=[query.query], n_results=5)
    return "\\n\\n".join(reversed(found["documents"][0]))[:3000]'''
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"

def smoke(source: str) -> str | None:
    return smoke_test(source, HashingEmbedder())


class RecordingClient:
    """The reflector's client, keeping every request and reply (the reflector only returns the outcome)."""

    def __init__(self, client: LLMClient):
        self.client = client
        self.endpoint = client.endpoint
        self.exchanges: list[tuple[list[dict[str, str]], str]] = []

    def complete(self, messages, **kwargs):
        completion = self.client.complete(messages, **kwargs)
        self.exchanges.append((messages, completion.text))
        return completion


def example_definitions(messages: list[dict[str, str]]) -> list[str]:
    """The source of every definition in the worked example of the prompt: the code blocks of its user
    message after the first (the program)."""
    found = []
    for block in re.findall(r"```python\n(.*?)```", messages[1]["content"], re.DOTALL)[1:]:
        try:
            tree = ast.parse(block)
        except SyntaxError:  # the old example did not parse: compare its lines as they are
            found.append(block)
            continue
        found += [ast.get_source_segment(block, node) or "" for node in tree.body]
    return found


def _normal(code: str) -> str:
    return "\n".join(line.strip() for line in code.strip().splitlines() if line.strip())


def copy_similarity(reply: str, examples: list[str]) -> float:
    """The highest similarity between a definition in the reply's code blocks and one of the examples."""
    best = 0.0
    for block in parse_reply(reply).code_blocks:
        code = textwrap.dedent(block)
        try:
            pieces = [ast.get_source_segment(code, n) or "" for n in ast.parse(code).body]
        except SyntaxError:
            pieces = [block]
        for piece in pieces:
            for example in examples:
                best = max(best, difflib.SequenceMatcher(None, _normal(piece), _normal(example)).ratio())
    return best


def definitions(source: str) -> dict[str, str]:
    """Top-level definitions and methods (as Class.method and bare method) by name -> AST dump."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = ast.dump(node)
        elif isinstance(node, ast.ClassDef):
            found[node.name] = ast.dump(node)
            for method in node.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found.setdefault(method.name, ast.dump(method))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = ast.dump(node.value)
    return found


def changed_in_reply(parent: str, reply: str) -> list[str]:
    """Names the reply's code defines differently from the parent (a method compared with the parent's
    method of that name): what a merge should have applied."""
    theirs = definitions(parent)
    changed = []
    for block in parse_reply(reply).code_blocks:
        for name, dump in definitions(block).items():
            if name != "COMMIT_MESSAGE" and name in theirs and theirs[name] != dump:
                changed.append(name)
    return changed


def classify(parent: str, reply: str, request: ReflectionRequest, edit_format: str) -> tuple[str, str | None]:
    try:
        edit = read_edit(parent, reply, edit_format)  # type: ignore[arg-type]
        error = check_child(parent, edit.source, request, smoke, edit.unchanged)
    except (ReplyError, PatchError, EditError) as exc:
        error = str(exc)
    if error is None:
        return "valid child", None
    return reply_kind(error), error


def parents_with_cases(count: int, task: Task, questions: int, texts: int) -> tuple[list[ReflectionRequest], Task]:
    embedder = HashingEmbedder()
    asked = task.items[:: max(1, len(task.items) // questions)][:questions]
    written = covering_texts(task, asked, embedder, texts)
    small = Task(name=task.name, texts=written, items=asked)
    made = []
    for i, source in enumerate(seeds_and_mutants(count)):
        report = evaluate(source, small, OfflineBackend(), embedder)
        failures, success = sample_cases(report.results, random.Random(i))
        made.append(ReflectionRequest(parent_id=program_id(source), parent_source=source, parent_score=report.score,
                                      failures=failures, success=success, write_example=report.write_example))
    return made, small


def offline_score(source: str, task: Task) -> float:
    return evaluate(source, task, OfflineBackend(), HashingEmbedder()).score


def run(url: str, model: str, args: argparse.Namespace) -> None:
    task = load_task("locomo", conversation=args.conversation, data=args.data)
    requests, small = parents_with_cases(args.parents, task, args.questions, args.texts)
    config = EndpointConfig(base_url=url, model=model, max_tokens=args.max_tokens, temperature=0.7, json_mode=False,
                            timeout_s=1800)
    client = RecordingClient(LLMClient(ChatEndpoint("reflector", config), cache=MemoryCache()))
    reflector = LLMReflector(client, edit_format=args.format, context_tokens=args.context, max_repairs=args.repairs)
    seen = {r.parent_id for r in requests}
    replies, outcomes = Counter(), Counter()
    copies, old_copies, child_copies, child_old_copies, merge_suspects, lines = 0, 0, 0, 0, [], []
    started = time.monotonic()
    out = open(args.out, "w", encoding="utf-8")
    print(f"{model} at {url}: {len(requests)} parents x {args.rounds} rounds, {args.repairs} repair(s), "
          f"format {args.format}, max_tokens {args.max_tokens}, context {args.context}; replies -> {args.out}")
    for request in requests:
        tried: list[LineageEntry] = []
        for round_ in range(1, args.rounds + 1):
            asked = request.model_copy(update={"lineage": tried, "known_ids": sorted(seen), "iteration": round_})
            client.exchanges.clear()
            result = reflector.reflect(asked, smoke)
            for attempt, (messages, reply) in enumerate(client.exchanges, 1):
                kind, error = classify(request.parent_source, reply, asked, args.format)
                similarity = copy_similarity(reply, example_definitions(messages))
                old = copy_similarity(reply, [OLD_EXAMPLE])
                changed = changed_in_reply(request.parent_source, reply) if kind == "no change" else []
                replies[kind] += 1
                copies += similarity >= COPY_SIMILARITY
                old_copies += old >= COPY_SIMILARITY
                if changed:
                    merge_suspects.append(f"{request.parent_id} round {round_} attempt {attempt}: {changed}")
                out.write(json.dumps({"parent": request.parent_id, "round": round_, "attempt": attempt, "kind": kind,
                                      "error": error, "copy_similarity": round(similarity, 3), "old_example_similarity": round(old, 3),
                                      "changed": changed,
                                      "prompt": messages, "reply": reply}) + "\n")
                out.flush()
            if isinstance(result, Child):
                outcomes["valid child"] += 1
                last_prompt, last_reply = client.exchanges[-1]
                copied = copy_similarity(last_reply, example_definitions(last_prompt)) >= COPY_SIMILARITY
                child_copies += copied
                child_old_copies += copy_similarity(last_reply, [OLD_EXAMPLE]) >= COPY_SIMILARITY
                score = offline_score(result.source, small)
                duplicate = result.id in seen
                seen.add(result.id)
                tried.append(LineageEntry(id=result.id, relation="child", commit_message=result.commit_message,
                                          score=score, delta=score - request.parent_score))
                lines.append(f"  {request.parent_id} r{round_}: child {result.id} ({'COPY of the example, ' if copied else ''}"
                             f"{'duplicate, ' if duplicate else ''}offline {score:.3f}): {result.commit_message[:80]!r}")
            else:
                kind = classify(request.parent_source, client.exchanges[-1][1], asked, args.format)[0] \
                    if client.exchanges else "refused"
                outcomes[f"discarded ({kind})"] += 1
                tried.append(LineageEntry(id="-", relation="child", commit_message="(no valid child)",
                                          note=result.errors[-1][:200] if result.errors else result.reason))
                lines.append(f"  {request.parent_id} r{round_}: discarded, last: {kind}")
            print(lines[-1], flush=True)
    out.close()
    total = sum(replies.values())
    print(f"\nreplies: {total} in {time.monotonic() - started:.0f} s; " + ", ".join(f"{k} {v}" for k, v in replies.most_common()))
    print(f"replies copying the example shown (similarity >= {COPY_SIMILARITY}): {copies}/{total}; "
          f"copying the fixed example of before issue 15: {old_copies}/{total}")
    print(f"reflections: {sum(outcomes.values())}; " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()))
    print(f"valid children copying the example shown: {child_copies}/{outcomes['valid child']}; "
          f"copying the fixed example of before issue 15: {child_old_copies}/{outcomes['valid child']}")
    print(f"'no change' replies whose code differs from the parent's (merge bugs): {len(merge_suspects)}")
    for suspect in merge_suspects:
        print(f"  {suspect}")


def reclassify(path: str, edit_format: str) -> None:
    """Every reply of an earlier run read and checked again by the code as it is now (its repair turns
    stay those the model got then; "already evaluated" cannot recur: the ids seen then are not stored)."""
    kinds: Counter = Counter()
    for line in open(path, encoding="utf-8"):
        row = json.loads(line)
        parent = re.findall(r"```python\n(.*?)```", row["prompt"][1]["content"], re.DOTALL)[0]
        request = ReflectionRequest(parent_id=row["parent"], parent_source=parent, parent_score=0.0)
        kind, error = classify(parent, row["reply"], request, edit_format)
        kinds[(row["kind"], kind)] += 1
        print(f"{row['parent']} r{row['round']} a{row['attempt']}: {row['kind']} -> {kind}"
              + (f" ({error.splitlines()[0][:150]})" if error else ""))
    print("\nthen -> now: " + ", ".join(f"{a} -> {b}: {n}" for (a, b), n in kinds.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser()
    model_arguments(parser)
    parser.add_argument("--parents", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2, help="reflections per parent, each seeing the ones before")
    parser.add_argument("--repairs", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=600)
    parser.add_argument("--context", type=int, default=4096, help="the server's context window (tokens)")
    parser.add_argument("--format", choices=EDIT_FORMATS, default="function")
    parser.add_argument("--conversation", type=int, default=7)
    parser.add_argument("--questions", type=int, default=12)
    parser.add_argument("--texts", type=int, default=40)
    parser.add_argument("--data", default=str(LOCOMO))
    parser.add_argument("--out", default="/tmp/reflections.jsonl")
    parser.add_argument("--reclassify", metavar="FILE", help="read the replies of an earlier --out again, no model")
    args = parser.parse_args()
    if args.reclassify:
        reclassify(args.reclassify, args.format)
        return
    if not (args.smollm2 or (args.url and args.model)):
        parser.error("give --smollm2, or --url and --model")
    with_server(args, run)


if __name__ == "__main__":
    main()
