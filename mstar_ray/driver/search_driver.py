"""The search driver: the Ray side of a search. It sets up the run's services and the worker pools, hands
the policy's work (``search_loop.policy``, then the end of the search: ``search_loop.endgame``) to idle actors and the
results back, keeps the live line and ``live.json`` current, and at the end maps the population.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from mstar_ray.actors.evaluator_actor import new_evaluator
from mstar_ray.actors.pool import WorkerPool, WorkersKeepDying
from mstar_ray.actors.progress_board import start_progress_board
from mstar_ray.actors.reflector_actor import ReflectorActor
from mstar_ray.actors.run_services import start_run_services
from mstar_ray.actors.structure_tasks import population_matrix
from mstar_ray.actors.wiring import RoleClients
from mstar_ray.driver.cluster import check_sandboxes, pool_size, schedulable_resources
from mstar_ray.driver.node_watch import NodeWatch
from mstar_ray.driver.progress import Progress, ProgressState
from mstar_ray.driver.recorder import RunRecorder
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog.live import InFlight
from mstar_ray.search.jobs import EvalJob, EvalOutcome
from mstar_ray.search.population import Member
from mstar_ray.search.selection import Selection
from mstar_ray.search.work import WorkKind
from mstar_ray.search.split import SplitPlan
from mstar_ray.search_loop.endgame import Endgame
from mstar_ray.search_loop.policy import WAIT_S, FatalRunError, SearchPolicy
from mstar_ray.state.candidate import Seed
from mstar_ray.state.search_state import SearchState
from mstar_ray.structure.population_map import PopulationMap, map_population
from mstar_ray.tasks.model import Task
from mstar_ray.reflect.reflector import ReflectionOutcome
from mstar_ray.reflect.request import ReflectionRequest

LIVE_INTERVAL_S = 2.0  # live.json is rewritten at most this often


@dataclass
class RunResult:
    best: Member
    best_seed: Member
    tests: dict[str, EvalOutcome]  # by member id: the best and the best seed on the held-out questions
    selection: Selection  # how the best was chosen
    wall_s: float
    stop_reason: str
    population_map: PopulationMap | None = None
    # by member id: why a program's confirmation or test has no result or broke the contract
    side_failures: dict[str, str] | None = None


class SearchDriver:
    def __init__(self, config: RunConfig, seeds: list[Seed], task: Task, run_dir: RunDir, progress: Progress, *,
                 watch: Callable[[], None] | None = None, held: dict[str, float] | None = None,
                 workers: dict[WorkKind, Callable[[], Any]] | None = None):
        """``watch``: called every turn of the loop (the served models' replicas, ``driver.serving``); ``held``:
        resources of the cluster that those replicas hold, which evaluators cannot have; ``workers``: how to start
        each kind of actor, in place of the evaluator and reflector actors (a simulation's stand-ins:
        ``scripts/bench_scale.py``); each must answer the same calls."""
        self.config = config
        self.watch = watch
        self.held = held or {}
        self.workers = workers
        self.seeds = seeds
        self.task = task
        self.run_dir = run_dir
        self.progress = progress
        self.shown = ProgressState(target=config.search.max_candidates)  # the counts are the policy's state
        self._best_shown: str | None = None  # the incumbent whose interval the live line shows
        self._returned: Member | None = None  # the program the end of the search chose, once it has
        self._live_at = 0.0
        self._live: dict[str, Any] | None = None
        self.node_watch = NodeWatch()

    # ------------------------------------------------------------------------------------------ set-up

    def _start(self, *, check_split: bool = False) -> None:
        cfg = self.config
        self.cache, self.gateway = start_run_services(self.run_dir.path, cfg.llm)
        roles = RoleClients(cfg.llm, cache=self.cache, gateway=self.gateway)
        embedder = roles.embedder()
        self.progress.message(f"choosing the split with {embedder.name} embeddings ...")
        self.plan = SplitPlan(self.task, embedder, test_fraction=cfg.split.test_fraction,
                              static_size=cfg.split.static_size, rotating_size=cfg.split.rotating_size,
                              train_ratio=cfg.split.train_ratio, seed=cfg.search.seed,
                              confirmation_size=cfg.split.confirmation_size, test_texts=cfg.split.test_texts,
                              screen_size=cfg.search.cascade.slice_size if cfg.search.cascade else 0)
        self.run_dir.write_calls(roles.drain_calls(), candidate=None)  # a remote embedder's, priced by the gateway
        if check_split:
            stored = self.run_dir.read_split()
            if stored != self.plan.split:
                raise FatalRunError("the split rebuilt on resume differs from split.json (changed data or embedder?)")
        else:
            self.run_dir.write_split(self.plan.split)
        self.board, self.board_name = start_progress_board()
        resources = {name: total - self.held.get(name, 0.0) for name, total in schedulable_resources().items()}
        evaluators = pool_size(cfg.search.evaluations_in_flight, cfg.ray.evaluator_cpus, resources,
                               cfg.ray.evaluator_resources)
        spare = resources.get("CPU", 0) - (0 if cfg.ray.evaluator_resources else evaluators * cfg.ray.evaluator_cpus)
        reflectors = cfg.search.reflections_in_flight
        if cfg.ray.reflector_cpus > 0 and spare < reflectors * cfg.ray.reflector_cpus:
            raise FatalRunError(
                f"ray.reflector_cpus: {reflectors} reflectors need {reflectors * cfg.ray.reflector_cpus:g} CPUs but only "
                f"{spare:g} remain beside {evaluators} evaluators; lower it (0 is fine: reflectors mostly wait)")
        self.pool: WorkerPool[EvalJob | ReflectionRequest, EvalOutcome | ReflectionOutcome]
        self.pool = WorkerPool(self.workers or {"evaluate": self._new_evaluator, "reflect": self._new_reflector},
                               {"evaluate": evaluators, "reflect": reflectors})
        self.recorder = RunRecorder(self.run_dir, self.progress, self.shown)
        self.policy = SearchPolicy(cfg, self.task, self.plan, self.recorder, evaluators=evaluators,
                                   llm_spent=lambda: self.usage.stop)
        self.progress.message(check_sandboxes(self.pool.all_actors(), self.progress.message))
        split = self.plan.split
        evidence = "" if split.static_evidence is None else f", holding {split.static_evidence:.0%} of the static evidence"
        self.progress.message(
            f"split: {len(split.static)} static, {cfg.split.rotating_size} rotating per iteration, "
            f"{len(split.confirmation)} for confirmation, {len(split.test)} test questions; "
            f"{len(split.train_texts)} of {len(self.task.texts)} texts written ({len(split.evidence_texts)} for the "
            f"static evidence{evidence}); {evaluators} evaluators, {reflectors} reflectors")
        if split.screen and cfg.search.cascade is not None:  # a screen is drawn only for a cascade
            self.progress.message(f"cascade: every program is first evaluated on {len(split.screen)} of the static "
                                  f"questions with {len(split.screen_texts)} texts written (rule {cfg.search.cascade.rule})")

    def _new_evaluator(self) -> Any:  # an EvaluatorActor handle
        return new_evaluator(self.config, self.cache.name, self.gateway.name, self.board_name)

    def _new_reflector(self) -> Any:  # a ReflectorActor handle
        cfg = self.config
        return ReflectorActor.options(  # type: ignore[attr-defined]  # mypy does not apply class decorators: @ray.remote made it an ActorClass
            num_cpus=cfg.ray.reflector_cpus, max_restarts=cfg.ray.max_restarts, max_task_retries=cfg.ray.max_restarts,
        ).remote(cfg.search.reflector, cfg.llm, cfg.sandbox, cfg.search.max_repairs,
                 self.cache.name, self.gateway.name, str(self.run_dir.path), list(cfg.search.ensemble or ()))

    # ------------------------------------------------------------------------------------------ the loop

    def run(self, restored: SearchState | None = None) -> RunResult:
        # A run killed before it wrote its split has evaluated nothing: its resume chooses the split afresh.
        self._start(check_split=restored is not None and self.run_dir.has_split())
        if restored is not None:
            self.gateway.restore(restored.usage)
        # The gateway's figures as of this turn of the loop: taken once per turn (``_refresh``), read by the live
        # line and by the policy's budget check alike.
        self.usage = self.gateway.snapshot()
        self.policy.start([seed.candidate() for seed in self.seeds], restored, self.run_dir.read_program)
        self.shown.phase = "searching"
        try:
            self.policy.drive(self.pool, self._refresh)
        except WorkersKeepDying as exc:
            raise FatalRunError(str(exc)) from None
        return self._final()

    def _refresh(self, *, show: bool = True, jobs: list[EvalJob] | None = None) -> None:
        """Cost and each evaluation's own progress (``jobs``: those in flight, default the search's) into the
        live line, and into ``live.json`` for ``status``."""
        if self.watch is not None:
            self.watch()
        self.usage = self.gateway.snapshot()
        self.shown.cost_usd, self.shown.tokens = self.usage.total.cost_usd, self.usage.total.tokens
        self.shown.requests_in_flight = sum(self.usage.in_flight.values())
        running = self.pool.running()
        self.shown.evaluating = sum(1 for work in running if work.kind == "evaluate")
        self.shown.reflecting = sum(1 for work in running if work.kind == "reflect")
        if jobs is None:
            jobs = [work.payload for work in running if work.kind == "evaluate" and isinstance(work.payload, EvalJob)]
        self.shown.in_flight = self._in_flight(jobs)
        for line in self.node_watch.look():
            self.progress.message(line)
        self.shown.nodes = self.node_watch.summary
        self.shown.waiting_for_node = len(jobs) - len(self.shown.in_flight) if self.node_watch.starting else 0
        self._show_best()
        self._write_live()
        if show:
            self.progress.update(self.shown, self.policy.state)

    def _show_best(self, returned: Member | None = None) -> None:
        """The incumbent, or once the end of the search chose it the ``returned`` program, with its interval (a
        bootstrap: worked out once per program shown, not per turn)."""
        best = returned or self._returned or self.policy.incumbent.best
        self._returned = returned or self._returned
        if best is not None and best.id != self._best_shown:
            self.shown.best_score = best.score
            self.shown.best_low, self.shown.best_high = self.policy.incumbent.interval(best)
            self._best_shown = best.id

    def _in_flight(self, jobs: list[EvalJob]) -> list[InFlight]:
        try:
            board = ray.get(self.board.snapshot.remote(), timeout=WAIT_S) if jobs else {}
        except (GetTimeoutError, RayActorError):
            return self.shown.in_flight  # advisory: keep what was last seen rather than stall the loop
        return [InFlight.of(job.candidate_id, job.purpose, board[job.key]) for job in jobs if job.key in board]

    def _write_live(self) -> None:
        live = {"evaluations": [entry.model_dump() for entry in self.shown.in_flight], "nodes": self.shown.nodes,
                "waiting_for_node": self.shown.waiting_for_node}
        now = time.monotonic()
        if live != self._live and (now - self._live_at >= LIVE_INTERVAL_S or not live["evaluations"]):
            self.run_dir.write_live({"phase": self.shown.phase, **live, "written_at": time.time()})
            self._live, self._live_at = live, now

    # ------------------------------------------------------------------------------------------ the end

    def _final(self) -> RunResult:
        """The policy's end of the search (``search_loop.endgame``) through the same pool, then the population map."""
        ending = Endgame(self.policy, self.recorder, test_texts=self._test_texts()).run(self.pool, self._refresh)
        self._show_best(ending.best)  # from here the live line shows what the run returns, not the incumbent
        self.pool.shutdown()  # done: their CPUs go to the distance tasks
        population_map = self._population_map()
        self.shown.phase = "done"
        stop_reason = self.policy.stopped()
        self._refresh(show=False, jobs=[])
        self.run_dir.clear_live()
        self.progress.close(self.shown, self.policy.state)
        return RunResult(best=ending.best, best_seed=ending.best_seed, tests=ending.tests, selection=ending.selection,
                         wall_s=time.monotonic() - self.policy.started, stop_reason=str(stop_reason),
                         population_map=population_map, side_failures=ending.failures)

    def _test_texts(self) -> list[str]:
        """Every text of the task, or ``split.test_texts`` of them (those holding the test questions' evidence
        and those covering them best) when the run bounds what its test writes."""
        return self.plan.split.test_texts or [t.id for t in self.task.texts]

    def _population_map(self) -> PopulationMap | None:
        """The population's structural clusters and map (its distance matrix as Ray tasks over the cluster once it
        is big enough to gain from it); the trees are the ones the structure index built when each program was
        queued."""
        self.shown.phase = "structural clusters"
        self.progress.update(self.shown, self.policy.state, force=True)
        found = map_population(self.policy.state.members, self.policy.structure, seed=self.config.search.seed,
                               matrix=population_matrix)
        if found is not None:
            self.run_dir.write_population_map(found)
        return found
