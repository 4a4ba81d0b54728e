"""The evaluator actor: runs the task-agent protocol for one candidate on the questions it is given, the
candidate's code in a sandbox subprocess, every LLM and embedding call through the run's shared cache
and gateway, its progress posted to the run's progress board. It keeps nothing between jobs that a
replacement would miss."""

from __future__ import annotations

import os

import ray
from typing import Any

from mstar_ray.actors.progress_board import ProgressReporter
from mstar_ray.actors.run_services import Remote
from mstar_ray.actors.wiring import RoleClients
from mstar_ray.agent.evaluation import evaluate
from mstar_ray.results import EvalConcurrency
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.run_config import RunConfig
from mstar_ray.sandbox_host.fork_server import warm_fork_servers
from mstar_ray.sandbox_host.process import check_layers
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.search.jobs import EvalJob, EvalOutcome, static_score
from mstar_ray.tasks.adapter import register
from mstar_ray.tasks.model import Task


@ray.remote
class EvaluatorActor:
    def __init__(self, settings: LLMSettings, limits: SandboxLimits, cache_name: str, gateway_name: str,
                 board_name: str | None = None, concurrency: EvalConcurrency | None = None):
        warm_fork_servers()  # with the actor, not at its first job
        # the run's services by name (see run_services): no actor handle among the constructor arguments
        self.roles = RoleClients(settings, cache=Remote.named(cache_name), gateway=Remote.named(gateway_name))
        self.limits = limits
        self.concurrency = concurrency  # None: evaluate's default for the backend
        self.backend = self.roles.backend()
        self.embedder = self.roles.embedder()
        self.judge = self.roles.client("judge")
        # the run's ProgressBoard, by name as the services are; None: no progress reported
        self.board = ray.get_actor(board_name) if board_name is not None else None

    def evaluate(self, job: EvalJob) -> EvalOutcome:
        if job.family_ref is not None:
            register(job.family_ref)  # a family of the user's task adapter, made here from what the job carries
        task = Task(name=job.task_name, family=job.family, texts=job.texts, items=job.items)
        self.roles.drain_calls()  # a retried job starts its own record
        reporter = ProgressReporter(self.board, job.key) if self.board is not None else None
        try:
            report = evaluate(job.source, task, self.backend, self.embedder, limits=self.limits,
                              judge=self.judge, verdicts=job.judge, progress=reporter,
                              feedback_ids=job.feedback_ids, attribute=job.attribute,
                              concurrency=self.concurrency if self.backend.waits else None)
        finally:
            if reporter is not None:
                reporter.close()
        return EvalOutcome(
            candidate_id=job.candidate_id, purpose=job.purpose, report=report,
            static_score=static_score(report, job.static_ids),
            node_id=ray.get_runtime_context().get_node_id(), worker_pid=os.getpid(), calls=self.roles.drain_calls(),
        )

    def sandbox_layers(self) -> dict[str, Any]:
        """The layers a sandbox gets on this worker; raises ``SandboxUnavailable`` when a required one is missing."""
        return check_layers(self.limits)

    def pid(self) -> int:
        return os.getpid()


def new_evaluator(config: RunConfig, cache_name: str, gateway_name: str, board_name: str | None = None) -> Any:
    """An evaluator actor as a run asks for one: its resources, restarts and the run's services by name."""
    # SPREAD: evaluations share the nodes' cores and model connections, and a lost node takes few with it.
    return EvaluatorActor.options(  # type: ignore[attr-defined]  # mypy does not apply class decorators: @ray.remote made it an ActorClass
        num_cpus=config.ray.evaluator_cpus, resources=config.ray.evaluator_resources, scheduling_strategy="SPREAD",
        max_restarts=config.ray.max_restarts, max_task_retries=config.ray.max_restarts,
    ).remote(config.llm, config.sandbox, cache_name, gateway_name, board_name, config.evaluation)
