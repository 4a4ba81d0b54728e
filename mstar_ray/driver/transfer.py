"""``mstar-ray transfer RUN_DIR... [--tasks CONFIG.yaml ...]``: every run's returned program and the seeds,
each evaluated on every run's task, as that run tested its own program (its held-out test items, with its test
texts written, feedback on its static items for a program that takes feedback), on evaluator actors in
parallel; the matrix (``mstar_ray.runlog.transfer_matrix``) is written to the output directory and to
every run directory, whose report draws it. ``--tasks`` adds columns for tasks no run searched on, split as a
run of that config would split them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from mstar_ray.actors.wiring import RoleClients, fitted_evaluation, probe_endpoints
from mstar_ray.contract import inspect_program
from mstar_ray.driver.progress import Progress
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.exit_codes import EXIT_OK, InputError
from mstar_ray.families import family
from mstar_ray.program_id import program_id
from mstar_ray.run_config import RunConfig, load_run_config
from mstar_ray.runlog import layout
from mstar_ray.runlog.sources import load_source
from mstar_ray.runlog.transfer_matrix import TransferMatrix, TransferProgram, TransferTask
from mstar_ray.runlog.writer import write_atomic
from mstar_ray.search.jobs import EvalJob, EvalOutcome
from mstar_ray.search.split import Split, SplitPlan
from mstar_ray.search.work import Crashed, Raised, Work
from mstar_ray.tasks.model import Task
from mstar_ray.families.task_registry import task_from_config

MAX_ATTEMPTS = 3  # an evaluation whose evaluator dies this often is left empty, with the reason

if TYPE_CHECKING:
    from mstar_ray.actors.pool import WorkerPool


@dataclass
class Column:
    task: Task
    split: Split
    source: str

    def job(self, program: str, source: str) -> EvalJob:
        """The evaluation the run that owns this column made of its own program at the end
        (``driver.search_driver``)."""
        test, static = self.split.test, self.split.static
        feedback = list(static) if inspect_program(source).has_feedback else []
        holders = self.task.evidence_holders()
        wanted = set(self.split.test_texts or [t.id for t in self.task.texts])
        wanted |= {holders[u] for q in self.task.items if q.id in set(feedback) for u in q.evidence if u in holders}
        items = {q.id: q for q in self.task.items}
        return EvalJob(candidate_id=program, source=source, purpose="test", task_name=self.task.name,
                       family=self.task.family, texts=[t for t in self.task.texts if t.id in wanted],
                       items=[items[q] for q in test + feedback], static_ids=test, judge=True, feedback_ids=feedback)


def run_column(run_dir: Path) -> tuple[Column, RunConfig, list[tuple[str, str]]]:
    """A finished run's column and its programs: (label, source) of its returned program, then of its seeds."""
    config = load_run_config(run_dir / layout.CONFIG)
    summary_path = run_dir / layout.SUMMARY
    if not summary_path.is_file():
        raise InputError(f"{run_dir}: the run has not finished (no {layout.SUMMARY}): transfer needs the program it "
                         "returns; finish it with mstar-ray run --resume")
    best = json.loads(summary_path.read_text())["best"]["id"]
    directory = RunDir(run_dir)
    column = Column(task=task_from_config(config.task), split=directory.read_split(), source=str(run_dir))
    if not column.split.test:
        raise InputError(f"{run_dir}: its split holds out no test items, so there is nothing to score a program on")
    seeds = {program_id(seed.source): seed for seed in directory.read_seeds()}
    label = f"best of {run_dir.name}" + (f" = seed {seeds[best].name}" if best in seeds else "")
    return column, config, [(label, load_source(run_dir, best)), *((f"seed {s.name}", s.source) for s in seeds.values())]


def _config_column(path: Path) -> Column:
    """A task no run searched on, split as a run of this config would split it."""
    config = load_run_config(path)
    task = task_from_config(config.task)
    s = config.split
    plan = SplitPlan(task, RoleClients(config.llm).embedder(), test_fraction=s.test_fraction, static_size=s.static_size,
                     rotating_size=s.rotating_size, train_ratio=s.train_ratio, seed=config.search.seed,
                     confirmation_size=s.confirmation_size, test_texts=s.test_texts)
    return Column(task=task, split=plan.split, source=str(path))


@dataclass
class Crossing:
    """What is crossed: every run's program, then the seeds, against every task."""

    columns: list[Column]
    rows: dict[str, tuple[str, str]]  # program id -> (label, source), in row order
    natives: dict[str, int]  # program id -> the column of the run that returned it
    seeds: set[str]
    config: RunConfig  # the first run's: its models, sandbox and Ray settings serve every evaluation

    @classmethod
    def of(cls, run_dirs: list[str], task_configs: list[str]) -> Crossing:
        if not run_dirs:
            raise InputError("give at least one run directory")
        runs = [run_column(Path(run_dir)) for run_dir in run_dirs]
        rows: dict[str, tuple[str, str]] = {}
        natives: dict[str, int] = {}
        for index, (_, _, programs) in enumerate(runs):
            label, source = programs[0]
            rows.setdefault(program_id(source), (label, source))
            natives.setdefault(program_id(source), index)
        seeds = {program_id(source): (label, source) for _, _, programs in runs for label, source in programs[1:]}
        for seed_id, row in seeds.items():
            rows.setdefault(seed_id, row)
        columns = [column for column, _, _ in runs] + [_config_column(Path(path)) for path in task_configs]
        return cls(columns=columns, rows=rows, natives=natives, seeds=set(seeds), config=runs[0][1])

    def matrix(self, scores: list[list[float | None]], errors: dict[str, str]) -> TransferMatrix:
        return TransferMatrix(
            tasks=[TransferTask(name=c.task.name, family=c.task.family, metric=family(c.task.family).metric_for(self.config.llm.judge is not None),
                                source=c.source, items=len(c.split.test)) for c in self.columns],
            programs=[TransferProgram(label=label, id=p, native=self.natives.get(p), seed=p in self.seeds)
                      for p, (label, _) in self.rows.items()],
            scores=scores, errors=errors)


def _evaluate(crossing: Crossing, pool: WorkerPool[EvalJob, EvalOutcome],
              progress: Progress) -> tuple[list[list[float | None]], dict[str, str]]:
    """Every cell on the pool: an evaluator that dies is replaced and the cell re-issued (up to MAX_ATTEMPTS);
    an evaluation that raises leaves its cell empty with the reason."""
    from mstar_ray.search_loop.policy import WAIT_S

    ids, columns = list(crossing.rows), crossing.columns
    waiting = [Work("evaluate", columns[c].job(p, crossing.rows[p][1]), (r, c)) for r, p in enumerate(ids)
               for c in range(len(columns))]
    scores: list[list[float | None]] = [[None] * len(columns) for _ in ids]
    errors: dict[str, str] = {}
    attempts: dict[tuple[int, int], int] = {}
    while waiting or pool.busy():
        while waiting and pool.idle("evaluate"):
            pool.submit(waiting.pop(0))
        for done in pool.next_finished(WAIT_S):
            row, column = cell = cast(tuple[int, int], done.work.tag)  # every Work above was made with its cell
            where = f"{crossing.rows[ids[row]][0]} on {columns[column].task.name}"
            if isinstance(done, Crashed):
                attempts[cell] = attempts.get(cell, 0) + 1
                if attempts[cell] < MAX_ATTEMPTS:
                    waiting.append(done.work)
                    continue
                errors[f"{row},{column}"] = f"evaluators died {attempts[cell]} times: {done.error[:300]}"
            elif isinstance(done, Raised):
                errors[f"{row},{column}"] = f"{type(done.error).__name__}: {str(done.error)[:300]}"
            else:
                outcome: EvalOutcome = done.value
                scores[row][column] = outcome.static_score  # 0 for a program that broke the contract
                if (violation := outcome.report.violation) is not None:
                    errors[f"{row},{column}"] = (f"broke the contract during {violation.phase}: [{violation.kind}] "
                                                 f"{violation.message[:300]}")
            progress.message(f"{where}: {errors.get(f'{row},{column}') or f'{scores[row][column]:.3f}'}")
    return scores, errors


def run_transfer(run_dirs: list[str], task_configs: list[str], out: str, address: str | None) -> int:
    import ray

    from mstar_ray.actors.evaluator_actor import new_evaluator
    from mstar_ray.actors.pool import WorkerPool
    from mstar_ray.actors.run_services import start_run_services
    from mstar_ray.driver.cluster import check_sandboxes, connect, pool_size

    progress = Progress()
    crossing = Crossing.of(run_dirs, task_configs)
    output = Path(out)
    output.mkdir(parents=True, exist_ok=True)
    measured = probe_endpoints(crossing.config.llm, progress.message)
    config = crossing.config.model_copy(update={
        "llm": measured, "evaluation": fitted_evaluation(crossing.config.evaluation, measured, progress.message)})
    resources = connect(config, address)
    try:
        cache, gateway = start_run_services(output, config.llm)
        cells = len(crossing.rows) * len(crossing.columns)
        size = pool_size(cells, config.ray.evaluator_cpus, resources, config.ray.evaluator_resources)
        pool: WorkerPool[EvalJob, EvalOutcome]
        pool = WorkerPool({"evaluate": lambda: new_evaluator(config, cache.name, gateway.name)}, {"evaluate": size})
        progress.message(check_sandboxes(pool.all_actors()))
        progress.message(f"{len(crossing.rows)} programs x {len(crossing.columns)} tasks on {size} evaluators")
        matrix = crossing.matrix(*_evaluate(crossing, pool, progress))
        pool.shutdown()
    finally:
        ray.shutdown()
    data = matrix.model_dump_json(indent=1).encode()
    for place in [output, *map(Path, run_dirs)]:
        write_atomic(place / layout.TRANSFER, data)
    return EXIT_OK
