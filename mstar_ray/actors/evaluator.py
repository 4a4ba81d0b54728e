"""The evaluator actor: runs the task-agent protocol for one candidate on the questions it is given, the
candidate's code in a sandbox subprocess, every LLM and embedding call through the run's shared cache
and gateway, its progress posted to the run's progress board. It keeps nothing between jobs that a
replacement would miss."""

from __future__ import annotations

import os

import ray

from mstar_ray.actors.progress_board import ProgressReporter
from mstar_ray.agent.protocol import evaluate
from mstar_ray.llm.cache import CacheStore
from mstar_ray.llm.governor import Gateway
from mstar_ray.llm.roles import RoleClients
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.sandbox_host import SandboxLimits, shared_fork_server
from mstar_ray.search.jobs import EvalJob, EvalOutcome, static_score
from mstar_ray.tasks.model import Task


@ray.remote
class EvaluatorActor:
    def __init__(self, settings: LLMSettings, limits: SandboxLimits, cache: CacheStore, gateway: Gateway,
                 board=None):
        # The sandbox fork server starts with the actor: its imports cost a second or two of CPU that no
        # evaluation should pay, and a broken install shows at start-up rather than on the first job.
        shared_fork_server()
        self.roles = RoleClients(settings, cache=cache, gateway=gateway)
        self.limits = limits
        self.backend = self.roles.backend()
        self.embedder = self.roles.embedder()
        self.judge = self.roles.judge()
        self.board = board  # a ProgressBoard handle, or None: no progress reported

    def evaluate(self, job: EvalJob) -> EvalOutcome:
        task = Task(name=job.task_name, texts=job.texts, questions=job.questions)
        self.roles.drain_calls()  # a retried job starts its own record
        reporter = ProgressReporter(self.board, job.key) if self.board is not None else None
        try:
            report = evaluate(job.source, task, self.backend, self.embedder, limits=self.limits,
                              judge=self.judge if job.judge else None, progress=reporter,
                              feedback_ids=job.feedback_ids)
        finally:
            if reporter is not None:
                reporter.close()
        return EvalOutcome(
            candidate_id=job.candidate_id, purpose=job.purpose, report=report,
            static_score=static_score(report, job.static_ids),
            node_id=ray.get_runtime_context().get_node_id(), worker_pid=os.getpid(), calls=self.roles.drain_calls(),
        )

    def pid(self) -> int:
        return os.getpid()
