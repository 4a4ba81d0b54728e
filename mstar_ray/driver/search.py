"""The search driver: owns the population, the split and the budgets, and keeps R reflections and E
evaluations in flight over ``ray.wait`` (steady state, not lock-step generations).

A reflection starts only while fewer than E children wait for or undergo evaluation, so evaluators stay
busy without children piling up; with R = E = 1 this is the paper's sequential loop (reflect, evaluate,
add, reflect...). Every random choice is seeded by (run seed, iteration), never by timing.
"""

from __future__ import annotations

import collections
import random
import time
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from mstar_ray.actors.evaluator import EvaluatorActor
from mstar_ray.actors.progress_board import start_progress_board
from mstar_ray.actors.reflector import ReflectorActor
from mstar_ray.actors.run_services import start_run_services
from mstar_ray.actors.structure_tasks import pairwise_on_ray
from mstar_ray.actors.wiring import RoleClients
from mstar_ray.contract import inspect_program
from mstar_ray.driver.cluster import pool_size
from mstar_ray.driver.progress import Progress, ProgressState
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.llm.errors import BudgetExceeded, EndpointError
from mstar_ray.program_ast import changed_pieces
from mstar_ray.reflect.reflector import Child, Discard
from mstar_ray.reflect.request import ALREADY_EVALUATED, LineageEntry, ReflectionRequest, sample_cases
from mstar_ray.run_config import RunConfig
from mstar_ray.runlog.live import InFlight
from mstar_ray.sandbox_host import SandboxStartError, SandboxUnavailable
from mstar_ray.search.jobs import EvalJob, EvalOutcome
from mstar_ray.search.population import Member, Population
from mstar_ray.search.selection import Confirmation, Incumbent, Selection
from mstar_ray.search.split import SplitPlan
from mstar_ray.search.stop import SearchCount, first_reached, stop_conditions
from mstar_ray.state.candidate import Candidate, FixRound, Seed
from mstar_ray.state.replay import Restored
from mstar_ray.structure.families import Families, population_families
from mstar_ray.structure.index import StructureIndex
from mstar_ray.tasks.model import Task

MAX_DONORS = 6
MAX_REPLACEMENTS_PER_ACTOR = 3
# An evaluator that dies this many times on one candidate (each time after Ray's own restarts) does not get
# it again: the candidate is recorded as failed, here and on a resume.
MAX_CRASHES_PER_CANDIDATE = 2
WAIT_S = 1.0
LIVE_INTERVAL_S = 2.0  # live.json is rewritten at most this often


@dataclass
class Flight:
    kind: str  # eval | reflect
    actor: Any
    payload: Any
    candidate: Candidate | None = None


@dataclass
class RunResult:
    best: Member
    best_seed: Member
    tests: dict[str, EvalOutcome]  # by member id: the best and the best seed on the held-out questions
    selection: Selection  # how the best was chosen
    evaluated: int
    discarded: int
    violations: int
    wall_s: float
    stop_reason: str
    families: Families | None = None


class FatalRunError(RuntimeError):
    """The run cannot go on (an endpoint gone after its retries, a broken install); finished work is kept."""


class SearchDriver:
    def __init__(self, config: RunConfig, seeds: list[Seed], task: Task, run_dir: RunDir, progress: Progress):
        self.config = config
        self.seeds = seeds
        self.task = task
        self.run_dir = run_dir
        self.progress = progress
        self.population = Population()
        # By parent id: what became of each child reflected from it (its score and delta, a violation, a
        # discard), shown in the next reflection prompt on that parent so it does not try the same again.
        self.children_tried: dict[str, list[LineageEntry]] = collections.defaultdict(list)
        self.seen: set[str] = set()  # every candidate id ever queued: none is evaluated twice
        self.structure = StructureIndex(config.search.structure_level)  # ... nor any structure twice
        self.queue: collections.deque[Candidate] = collections.deque()
        self.fix_queue: collections.deque[ReflectionRequest] = collections.deque()
        self.flights: dict[ray.ObjectRef, Flight] = {}
        self.state = ProgressState(target=config.search.max_candidates)
        self._fix_rounds: dict[str, FixRound] = {}  # by the id of the child whose violation is being fixed
        self.replacements = 0
        self.crashes: collections.Counter[str] = collections.Counter()  # evaluator deaths per candidate
        self.iterations = 0
        self.reissue: collections.deque[int] = collections.deque()  # iterations whose reflection a resume re-issues
        self.stop_reason = ""  # a reason that ends the run (budget spent)
        self.budget_reached = ""  # which budget kept the last new reflection from starting ("" while none)
        cfg = config.search
        self.stop_conditions = stop_conditions(cfg.max_candidates, cfg.max_iterations, cfg.max_wall_s)
        self.started = time.monotonic()
        self._live_at = 0.0
        self._live: list[dict] | None = None

    # ------------------------------------------------------------------------------------------ set-up

    def _restore(self, restored: Restored) -> None:
        for member in restored.members:
            self.population.add(member)
        self.children_tried.update(restored.children_tried)
        self.seen = set(restored.seen)
        self.iterations = restored.iterations
        self.reissue = collections.deque(restored.reflections)
        self.gateway.restore(restored.usage)
        self.state.evaluated, self.state.discarded = restored.evaluated, restored.discarded
        self.state.violations = restored.violations
        self.state.duplicates = restored.duplicates
        self.started -= restored.wall_s  # wall_s and max_wall_s count every process of the run
        self.crashes.update(restored.crashes)
        for candidate in restored.queue:
            if self.crashes[candidate.id] >= MAX_CRASHES_PER_CANDIDATE:
                self._failed(candidate, f"its evaluation crashed evaluators {self.crashes[candidate.id]} times; "
                                        "not evaluated again")
            else:
                self.queue.append(candidate)
        for known in [*restored.members, *restored.queue]:
            self.structure.learn(known.id, known.source)
        for member in restored.members:  # the incumbent, replayed in the order the run scored them
            self.incumbent.offer(member)
        if len(self.population):
            self._show_best()
            seeds = [m.score for m in self.population.members if m.origin == "seed"]
            self.state.best_seed_score = max(seeds) if seeds else None
        detail = (f"{len(restored.members)} members, {len(restored.queue)} candidates and "
                  f"{len(restored.reflections)} reflections re-issued")
        self.run_dir.event("resumed", iteration=self.iterations, detail=detail)
        self.progress.message(f"resumed: {detail}")

    def _start(self, *, check_split: bool = False) -> None:
        cfg = self.config
        self.cache, self.gateway = start_run_services(self.run_dir.path, cfg.llm)
        embedder = RoleClients(cfg.llm, cache=self.cache, gateway=self.gateway).embedder()
        self.progress.message(f"choosing the split with {embedder.name} embeddings ...")
        self.plan = SplitPlan(self.task, embedder, test_fraction=cfg.split.test_fraction,
                              static_size=cfg.split.static_size, rotating_size=cfg.split.rotating_size,
                              train_ratio=cfg.split.train_ratio, seed=cfg.search.seed,
                              confirmation_size=cfg.split.confirmation_size, test_texts=cfg.split.test_texts)
        if check_split:
            stored = self.run_dir.read_split()
            if stored != self.plan.split:
                raise FatalRunError("the split rebuilt on resume differs from split.json (changed data or embedder?)")
        else:
            self.run_dir.write_split(self.plan.split)
        self.questions = {q.id: q for q in self.task.questions}
        self.texts = {t.id: t for t in self.task.texts}
        self.incumbent = Incumbent(self.plan.split.static, seed=cfg.search.seed)
        self.board, self.board_name = start_progress_board()
        resources = ray.cluster_resources()
        evaluators = pool_size(cfg.search.evaluations_in_flight, cfg.ray.evaluator_cpus, resources,
                               cfg.ray.evaluator_resources)
        spare = resources.get("CPU", 0) - (0 if cfg.ray.evaluator_resources else evaluators * cfg.ray.evaluator_cpus)
        reflectors = cfg.search.reflections_in_flight
        if cfg.ray.reflector_cpus > 0 and spare < reflectors * cfg.ray.reflector_cpus:
            raise FatalRunError(
                f"ray.reflector_cpus: {reflectors} reflectors need {reflectors * cfg.ray.reflector_cpus:g} CPUs but only "
                f"{spare:g} remain beside {evaluators} evaluators; lower it (0 is fine: reflectors mostly wait)")
        self.evaluators = [self._new_evaluator() for _ in range(evaluators)]
        self.reflectors = [self._new_reflector() for _ in range(reflectors)]
        self.idle_evaluators = list(self.evaluators)
        self.idle_reflectors = list(self.reflectors)
        self._check_sandboxes()
        split = self.plan.split
        evidence = "" if split.static_evidence is None else f", holding {split.static_evidence:.0%} of the static evidence"
        self.progress.message(
            f"split: {len(split.static)} static, {cfg.split.rotating_size} rotating per iteration, "
            f"{len(split.confirmation)} for confirmation, {len(split.test)} test questions; "
            f"{len(split.train_texts)} of {len(self.task.texts)} texts written ({len(split.evidence_texts)} for the "
            f"static evidence{evidence}); {len(self.evaluators)} evaluators, {len(self.reflectors)} reflectors")

    def _check_sandboxes(self) -> None:
        """Every actor sets up a sandbox once before any work: a node that cannot give a required layer
        stops the run at its start, naming the layer and the fix."""
        try:
            reports = ray.get([actor.sandbox_layers.remote() for actor in [*self.evaluators, *self.reflectors]])
        except (RayActorError, RayTaskError) as exc:
            cause = exc.as_instanceof_cause() if isinstance(exc, RayTaskError) else exc
            raise FatalRunError(f"a worker cannot run sandboxes: {cause}") from None
        missing = sorted({f"{layer} ({reason})" for report in reports for layer, reason in report["missing"].items()})
        self.progress.message(f"sandbox layers: {', '.join(reports[0]['layers'])}"
                              + (f"; not active, as allowed by sandbox.require: {'; '.join(missing)}" if missing else ""))

    def _new_evaluator(self):
        cfg = self.config
        # SPREAD: evaluations share the nodes' cores and model connections, and a lost node takes few with it.
        return EvaluatorActor.options(
            num_cpus=cfg.ray.evaluator_cpus, resources=cfg.ray.evaluator_resources, scheduling_strategy="SPREAD",
            max_restarts=cfg.ray.max_restarts, max_task_retries=cfg.ray.max_restarts,
        ).remote(cfg.llm, cfg.sandbox, self.cache.name, self.gateway.name, self.board_name)

    def _new_reflector(self):
        cfg = self.config
        return ReflectorActor.options(
            num_cpus=cfg.ray.reflector_cpus, max_restarts=cfg.ray.max_restarts, max_task_retries=cfg.ray.max_restarts,
        ).remote(cfg.search.reflector, cfg.llm, cfg.sandbox, cfg.search.max_repairs,
                 self.cache.name, self.gateway.name)

    # ------------------------------------------------------------------------------------------ the loop

    def run(self, restored: Restored | None = None) -> RunResult:
        # A run killed before it wrote its split has evaluated nothing: its resume chooses the split afresh.
        self._start(check_split=restored is not None and self.run_dir.has_split())
        if restored is not None:
            self._restore(restored)
        for seed in self.seeds:  # on a resume, only those a run killed early never queued
            if restored is None or seed.candidate().id not in self.seen:
                self._enqueue(seed.candidate())
        self.state.phase = "searching"
        while True:
            self._fill()
            if not self.flights:
                break
            ready, _ = ray.wait(list(self.flights), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                self._finish(ref, self.flights.pop(ref))
            self._refresh()
        self.stop_reason = self.stop_reason or self.budget_reached or "no parent could give a valid child"
        return self._final()

    def _fill(self) -> None:
        while self.idle_evaluators and self.queue:
            self._submit_eval(self.queue.popleft(), self.idle_evaluators.pop())
        while self.idle_reflectors:
            request = self._next_request()
            if request is None:
                break
            actor = self.idle_reflectors.pop()
            self.flights[actor.reflect.remote(request)] = Flight("reflect", actor, request)
            self.run_dir.event("started", candidate=request.parent_id, iteration=request.iteration,
                               detail=f"reflection ({request.kind})")

    def _search_questions(self, iteration: int) -> list[str]:
        return list(dict.fromkeys(self.plan.split.static + self.plan.rotating(iteration)))

    def _submit_eval(self, candidate: Candidate, actor) -> None:
        questions = self._search_questions(candidate.iteration)
        written = self.plan.written(questions)
        static = self.plan.split.static
        # The rotating questions are the feedback slice of a program that learns from feedback (MemRL): they are
        # training questions, answered before the static ones whose mean is the fitness.
        job = EvalJob(candidate_id=candidate.id, source=candidate.source, purpose="search", task_name=self.task.name,
                      texts=[self.texts[t] for t in written], questions=[self.questions[q] for q in questions],
                      static_ids=static, judge=self.config.search.judge_on == "all",
                      feedback_ids=[q for q in questions if q not in static])
        self.flights[actor.evaluate.remote(job)] = Flight("eval", actor, job, candidate)
        extra = len(written) - len(self.plan.split.train_texts)
        self.run_dir.event("started", candidate=candidate.id, iteration=candidate.iteration,
                           detail=f"evaluation: {len(written)} texts written ({extra} for the rotating evidence)")

    def _children_pending(self) -> int:
        return len(self.queue) + sum(1 for f in self.flights.values() if f.kind == "eval" and f.candidate.origin != "seed")

    def _budget_left(self) -> bool:
        """Whether a new reflection may start; else remembers which budget stopped it."""
        budget = self.gateway.snapshot().stop
        if budget:
            self.stop_reason = budget
            return False
        reflecting = sum(1 for f in self.flights.values() if f.kind == "reflect")
        count = SearchCount(committed=self.state.evaluated + self._children_pending() + reflecting,
                            iterations=self.iterations, elapsed_s=time.monotonic() - self.started)
        reached = first_reached(self.stop_conditions, count)
        if reached:
            self.budget_reached = reached
            return False
        return not self.stop_reason

    def _next_request(self) -> ReflectionRequest | None:
        if self.fix_queue and self._budget_left():
            return self.fix_queue.popleft()
        if self.reissue:
            return self._reflection_request(self.reissue.popleft())  # in flight when the run stopped
        seeds_pending = any(f.kind == "eval" and f.candidate.origin == "seed" for f in self.flights.values())
        if seeds_pending or any(c.origin == "seed" for c in self.queue) or not len(self.population):
            return None
        if self._children_pending() >= max(1, len(self.evaluators)) or not self._budget_left():
            return None
        self.iterations += 1
        return self._reflection_request(self.iterations)

    def _reflection_request(self, iteration: int) -> ReflectionRequest:
        cfg = self.config.search
        rng = random.Random(f"{cfg.seed}:reflect:{iteration}")
        parent = self.population.select_parent(rng, cfg.parent_selection, cfg.tau)
        failures, success = sample_cases(parent.results, rng)
        donors = [m.source for m in sorted(self.population.members, key=lambda m: -m.score) if m.id != parent.id]
        return ReflectionRequest(
            parent_id=parent.id, parent_source=parent.source, parent_score=parent.score,
            lineage=self._lineage(parent), failures=failures, success=success, write_example=parent.write_example,
            donors=donors[:MAX_DONORS], known_ids=sorted(self.seen), frozen_code=cfg.frozen_code,
            frozen_instructions=cfg.frozen_instructions, seed=rng.randrange(2**31), iteration=iteration,
        )

    def _lineage(self, parent: Member) -> list[LineageEntry]:
        entries = []
        line = [*self.population.ancestors(parent.id), parent]
        for member in line:
            before = self.population.get(member.parent).score if member.parent in self.population else None
            entries.append(LineageEntry(
                id=member.id, relation="parent" if member is parent else "ancestor", commit_message=member.commit_message,
                score=member.score, delta=None if before is None else member.score - before))
        return entries + self.children_tried[parent.id]

    # ------------------------------------------------------------------------------------------ results

    def _finish(self, ref: ray.ObjectRef, flight: Flight) -> None:
        pool, idle = ((self.evaluators, self.idle_evaluators) if flight.kind == "eval"
                      else (self.reflectors, self.idle_reflectors))
        try:
            result = ray.get(ref)
        except RayActorError as exc:
            # Ray already restarted the actor and retried up to max_restarts times: replace it and re-issue,
            # unless actors keep dying (a broken install or node image), which replacing cannot cure.
            self.replacements += 1
            if self.replacements > MAX_REPLACEMENTS_PER_ACTOR * (len(self.evaluators) + len(self.reflectors)):
                raise FatalRunError(f"{flight.kind} actors keep dying; the last: {exc}") from None
            self.progress.message(f"a {flight.kind} actor died ({type(exc).__name__}); replacing it and re-issuing its work")
            self.run_dir.event("retried", candidate=flight.candidate.id if flight.candidate else None,
                               detail=f"{flight.kind} actor died: {type(exc).__name__}")
            replacement = self._new_evaluator() if flight.kind == "eval" else self._new_reflector()
            pool[pool.index(flight.actor)] = replacement
            if flight.kind == "eval":
                self.crashes[flight.candidate.id] += 1
            if flight.kind == "eval" and self.crashes[flight.candidate.id] >= MAX_CRASHES_PER_CANDIDATE:
                idle.append(replacement)
                self._failed(flight.candidate, f"evaluators died {self.crashes[flight.candidate.id]} times on it: {exc}")
            elif flight.kind == "eval":
                self.flights[replacement.evaluate.remote(flight.payload)] = Flight("eval", replacement, flight.payload, flight.candidate)
            else:
                self.flights[replacement.reflect.remote(flight.payload)] = Flight("reflect", replacement, flight.payload)
            return
        except RayTaskError as exc:
            idle.append(flight.actor)
            self._task_error(exc, flight)
            return
        idle.append(flight.actor)
        if flight.kind == "eval":
            self._evaluated(flight.candidate, result)
        else:
            child = result.result.id if isinstance(result.result, Child) else None
            self.run_dir.write_calls(result.calls, candidate=child, parent=flight.payload.parent_id)
            self._reflected(flight.payload, result.result)

    def _task_error(self, exc: RayTaskError, flight: Flight) -> None:
        """A budget spent stops the run; an endpoint gone or a machine that cannot sandbox ends it; any other
        error is the failure of that one candidate (or reflection), and the search goes on."""
        cause = exc.as_instanceof_cause() if hasattr(exc, "as_instanceof_cause") else exc
        if isinstance(cause, BudgetExceeded):
            self.stop_reason = str(cause)
            self.progress.message(f"stopping: {cause}; the work in flight is abandoned, nothing half-written")
            return
        if isinstance(cause, (EndpointError, SandboxUnavailable, SandboxStartError)):
            raise FatalRunError(str(cause)) from None
        error = f"{type(cause).__name__}: {cause}"
        if flight.kind == "eval":
            self._failed(flight.candidate, f"its evaluation raised {error}")
        else:
            request = flight.payload
            self._reflected(request, Discard(parent=request.parent_id, reason=f"the reflection raised {error}"[:2000],
                                             attempts=0, errors=[]))

    def _failed(self, candidate: Candidate, error: str) -> None:
        """Recorded as this candidate's failure; counted like an evaluation, so budgets still move on."""
        self.progress.message(f"{candidate.id} could not be evaluated: {error[:300]}")
        self.run_dir.write_failed(candidate, error)
        if candidate.origin != "seed":
            self.state.evaluated += 1
        if candidate.parent is not None:
            self.children_tried[candidate.parent].append(LineageEntry(
                id=candidate.id, relation="child", commit_message=candidate.commit_message,
                note=f"evaluation failed: {error[:200]}"))

    def _evaluated(self, candidate: Candidate, outcome: EvalOutcome) -> None:
        report = outcome.report
        rotating = {q: "rotating" for q in set(self.plan.rotating(candidate.iteration)) - set(self.plan.split.static)}
        written = self.plan.written(self._search_questions(candidate.iteration))
        fitness = {"written": written, "static_evidence": self.plan.evidence_share(written, self.plan.split.static)[0]}
        for usage in [*report.llm.values(), *([report.embedding] if report.embedding else [])]:
            self.state.requests += usage.requests
            self.state.cache_hits += usage.cache_hits
        if report.violation is not None:
            self.run_dir.write_evaluation(candidate, outcome, rotating, **fitness)
            self.state.violations += 1
            v = report.violation
            self.progress.message(f"{candidate.id} broke the contract during {v.phase}: [{v.kind}] {v.message[:200]}")
            if candidate.parent is not None:
                self.children_tried[candidate.parent].append(LineageEntry(
                    id=candidate.id, relation="child", commit_message=candidate.commit_message, score=0.0,
                    delta=-self.population.get(candidate.parent).score, note=f"runtime violation: {v.kind}"))
            if candidate.origin != "seed":
                self.state.evaluated += 1
                self._maybe_fix(candidate, report)
            return
        member = Member(**candidate.identity(), score=outcome.static_score, results=report.results,
                        write_example=report.write_example)
        challenge = self.incumbent.offer(member)
        self.run_dir.write_evaluation(candidate, outcome, rotating, **fitness, interval=self.incumbent.interval(member),
                                      challenge=challenge)
        if challenge.verdict == "replaces" and candidate.origin != "seed":
            self.progress.message(f"{member.id} is the new best: static {member.score:.3f}, "
                                  f"{challenge.lead:+.3f} [{challenge.low:+.3f}, {challenge.high:+.3f}] on {challenge.incumbent}")
        self.population.add(member)
        if candidate.origin == "seed":
            seeds = [m.score for m in self.population.members if m.origin == "seed"]
            self.state.best_seed_score = max(seeds)
        else:
            self.state.evaluated += 1
            parent = self.population.get(candidate.parent)
            self.children_tried[parent.id].append(LineageEntry(id=member.id, relation="child", commit_message=member.commit_message,
                                                      score=member.score, delta=member.score - parent.score,
                                                      changed=changed_pieces(parent.source, member.source)))
        self._show_best()

    def _show_best(self) -> None:
        best = self.incumbent.best
        if best is not None:
            self.state.best_score = best.score
            self.state.best_low, self.state.best_high = self.incumbent.interval(best)

    def _maybe_fix(self, candidate: Candidate, report) -> None:
        cfg = self.config.search
        if not cfg.runtime_fix or candidate.fix_round >= cfg.max_repairs or cfg.reflector == "offline":
            return
        parent = self.population.get(candidate.parent)
        v = report.violation
        self.fix_queue.append(ReflectionRequest(
            kind="runtime_fix", parent_id=candidate.id, parent_source=candidate.source, parent_score=0.0,
            violation=f"during {v.phase}: [{v.kind}] {v.message}\n{v.traceback}".strip(),
            known_ids=sorted(self.seen), frozen_code=cfg.frozen_code, frozen_instructions=cfg.frozen_instructions,
            seed=candidate.fix_round, lineage=self._lineage(parent), iteration=candidate.iteration,
        ))
        self._fix_rounds[candidate.id] = FixRound(round=candidate.fix_round + 1, parent=parent.id,
                                                  iteration=candidate.iteration)

    def _reflected(self, request: ReflectionRequest, result: Child | Discard) -> None:
        if isinstance(result, Discard):
            self._fix_rounds.pop(request.parent_id, None)
            self.state.discarded += 1
            self.run_dir.write_discard(request, result, request.iteration)
            self.children_tried[request.parent_id].append(LineageEntry(
                id="-", relation="child", commit_message="(no valid child)", note=result.errors[-1][:200] if result.errors else result.reason))
            return
        fix = self._fix_rounds.pop(request.parent_id, None) if request.kind == "runtime_fix" else None
        parent, iteration, fix_round = (fix.parent, fix.iteration, fix.round) if fix else (request.parent_id, request.iteration, 0)
        self._enqueue(Candidate(id=result.id, source=result.source, parent=parent,
                                origin="runtime-fix" if fix else result.origin, commit_message=result.commit_message,
                                iteration=iteration, fix_round=fix_round, patch=result.patch,
                                edit_format=result.edit_format, tolerances=result.tolerances))

    def _enqueue(self, candidate: Candidate) -> None:
        if candidate.id in self.seen:
            self._duplicate(candidate, candidate.id, "identical")
            return
        placement = self.structure.place(candidate.source, candidate.parent)
        candidate.structural_key = placement.key
        candidate.novelty_parent, candidate.novelty_population = placement.to_parent, placement.to_population
        if self.config.search.dedup and placement.duplicate_of is not None and candidate.origin != "seed":
            self._duplicate(candidate, placement.duplicate_of, "structurally identical (layout, comments or docstrings differ)")
            return
        self.structure.add(candidate.id, placement)
        self.seen.add(candidate.id)
        self.run_dir.write_program(candidate.source)
        self.run_dir.write_queued(candidate)
        self.queue.append(candidate)

    def _duplicate(self, candidate: Candidate, original: str, how: str) -> None:
        """Not evaluated again: the child's row and its parent's history carry the original's score."""
        score = self.population.get(original).score if original in self.population else None
        self.progress.message(f"{candidate.id} is {how} to {original}; not evaluated again")
        self.run_dir.write_duplicate(candidate, original, score)
        if candidate.origin == "seed":
            return
        self.state.duplicates += 1
        if candidate.parent in self.population:
            parent = self.population.get(candidate.parent)
            self.children_tried[candidate.parent].append(LineageEntry(
                id=candidate.id, relation="child", commit_message=candidate.commit_message, score=score,
                delta=None if score is None else score - parent.score, changed=changed_pieces(parent.source, candidate.source),
                note=f"{how} to a program {ALREADY_EVALUATED}: change something that matters"))

    def _refresh(self, *, show: bool = True, jobs: list[EvalJob] | None = None) -> None:
        """Counts, cost and each evaluation's own progress (``jobs``: those in flight, default the search's)
        into the live line, and into ``live.json`` for ``status``."""
        snapshot = self.gateway.snapshot()
        self.state.cost_usd, self.state.tokens = snapshot.total.cost_usd, snapshot.total.tokens
        self.state.evaluating = sum(1 for f in self.flights.values() if f.kind == "eval")
        self.state.reflecting = sum(1 for f in self.flights.values() if f.kind == "reflect")
        if jobs is None:
            jobs = [f.payload for f in self.flights.values() if f.kind == "eval"]
        self.state.in_flight = self._in_flight(jobs)
        self._write_live()
        if show:
            self.progress.update(self.state)

    def _in_flight(self, jobs: list[EvalJob]) -> list[InFlight]:
        try:
            board = ray.get(self.board.snapshot.remote(), timeout=WAIT_S) if jobs else {}
        except (GetTimeoutError, RayActorError):
            return self.state.in_flight  # advisory: keep what was last seen rather than stall the loop
        return [InFlight.of(job.candidate_id, job.purpose, board[job.key]) for job in jobs if job.key in board]

    def _write_live(self) -> None:
        live = [entry.model_dump() for entry in self.state.in_flight]
        now = time.monotonic()
        if live != self._live and (now - self._live_at >= LIVE_INTERVAL_S or not live):
            self.run_dir.write_live({"phase": self.state.phase, "evaluations": live, "written_at": time.time()})
            self._live, self._live_at = live, now

    # ------------------------------------------------------------------------------------------ the end

    def _side_evaluations(self, members: list[Member], purpose: str, question_ids: list[str],
                          texts: list[str]) -> dict[str, EvalOutcome]:
        """Evaluations outside the search (the confirmation, the test), waited for with the live line and
        ``live.json`` showing how far each has got. A program that learns from feedback gets it on the static
        questions first, as in the search it got it on rotating questions before the static ones; those answers
        are neither scored nor logged here."""
        jobs = {}
        for m in members:
            feedback = list(self.plan.split.static) if inspect_program(m.source).has_feedback else []
            wanted = {*texts, *self.plan.evidence_texts(feedback)}  # the feedback questions' evidence too
            jobs[m.id] = EvalJob(candidate_id=m.id, source=m.source, purpose=purpose, task_name=self.task.name,
                                 texts=[text for text_id, text in self.texts.items() if text_id in wanted],
                                 questions=[self.questions[q] for q in question_ids + feedback],
                                 static_ids=question_ids, judge=purpose == "test", feedback_ids=feedback)
        refs = {self.evaluators[i % len(self.evaluators)].evaluate.remote(jobs[m.id]): m.id for i, m in enumerate(members)}
        outcomes: dict[str, EvalOutcome] = {}
        while len(outcomes) < len(refs):
            waiting = [ref for ref, member_id in refs.items() if member_id not in outcomes]
            ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=WAIT_S)
            for ref in ready:
                member_id = refs[ref]
                outcome = ray.get(ref)
                report = outcome.report.without(jobs[member_id].feedback_ids)
                outcomes[member_id] = outcome.model_copy(update={"report": report})
            self._refresh(jobs=[jobs[i] for i in jobs if i not in outcomes])
        split = "test" if purpose == "test" else "confirmation"
        for m in members:
            candidate = Candidate(**m.identity())
            self.run_dir.write_evaluation(candidate, outcomes[m.id], {q: split for q in question_ids})
        return outcomes

    def _confirmation(self) -> Confirmation | None:
        """The incumbent and the strongest contender (higher static score, within the noise) on the
        confirmation slice, with the evidence of its questions written; None when there is nothing to
        confirm or no slice to do it on."""
        contender = self.incumbent.contender()
        questions = self.plan.split.confirmation
        if contender is None or contender.verdict == "replaces" or not questions:
            return None
        pair = [self.incumbent.best, self.population.get(contender.challenger)]
        self.state.phase = "confirming"
        self.progress.message(f"confirming: {pair[1].id} scored {contender.lead:+.3f} above the best {pair[0].id}, "
                              f"within the noise; both on {len(questions)} fresh validation questions")
        outcomes = self._side_evaluations(pair, "confirm", questions, self.plan.written(questions))
        return Confirmation(incumbent=pair[0].id, contender=pair[1].id, questions=len(questions),
                            incumbent_score=outcomes[pair[0].id].static_score,
                            contender_score=outcomes[pair[1].id].static_score)

    def _test_texts(self) -> list[str]:
        """Every text of the task, or ``split.test_texts`` of them (those holding the test questions' evidence
        and those covering them best) when the run bounds what its test writes."""
        return self.plan.split.test_texts or [t.id for t in self.task.texts]

    def _final(self) -> RunResult:
        if not len(self.population):
            raise FatalRunError("no seed program could be evaluated without a runtime violation")
        spent = self.stop_reason.startswith("budget spent")
        selection = self.incumbent.select(None if spent else self._confirmation())
        best = self.population.get(selection.chosen)
        self.progress.message(f"final program {best.id}: {selection.how}")
        self.run_dir.event("finished", candidate=best.id, detail=f"selection ({selection.rule}): {selection.how}")
        seeds = [m for m in self.population.members if m.origin == "seed"]
        best_seed = max(seeds, key=lambda m: m.score)
        tests: dict[str, EvalOutcome] = {}
        if self.plan.split.test and not spent:
            self.state.phase = "testing the best"
            self.progress.update(self.state, force=True)
            tests = self._side_evaluations([best, best_seed] if best_seed.id != best.id else [best], "test",
                                           self.plan.split.test, self._test_texts())
        for actor in [*self.evaluators, *self.reflectors]:
            ray.kill(actor)  # done: their CPUs go to the distance tasks
        families = self._families()
        self.state.phase = "done"
        self.run_dir.event("stopped", detail=self.stop_reason)
        self._refresh(show=False, jobs=[])
        self.run_dir.clear_live()
        self.progress.close(self.state)
        return RunResult(best=best, best_seed=best_seed, tests=tests, selection=selection,
                         evaluated=self.state.evaluated, discarded=self.state.discarded,
                         violations=self.state.violations, wall_s=time.monotonic() - self.started,
                         stop_reason=self.stop_reason, families=families)

    def _families(self) -> Families | None:
        """The population's structural families, its distance matrix spread over the cluster as Ray tasks;
        the trees are the ones the structure index built when each program was queued."""
        self.state.phase = "structural families"
        self.progress.update(self.state, force=True)
        families = population_families(self.population.members, self.structure, seed=self.config.search.seed,
                                       matrix=pairwise_on_ray)
        if families is not None:
            self.run_dir.write_families(families)
        return families
