"""A search's whole configuration, read from YAML (``mstar-ray run CONFIG.yaml``). Unknown keys are
rejected with the nearest valid key; every error names its key path (``mstar_ray.config_file``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mstar_ray import seeds as library
from mstar_ray.results import EvalConcurrency
from mstar_ray.config_file import ConfigError, load_yaml
from mstar_ray.contract import ContractError, Violation, check_source
from mstar_ray.llm.settings import LLMSettings
from mstar_ray.reflect import registry as reflectors
from mstar_ray.reflect.guidance import SEED_GUIDANCE
from mstar_ray.reflect.registry import REFLECTOR_NAMES
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.search.parents import ParentSelection
from mstar_ray.serve.config import ServeConfig
from mstar_ray.tasks.adapter import AdapterError, AdapterTask, resolve_file
from mstar_ray.families.task_options import SyntheticOptions
from mstar_ray.families.task_registry import TaskConfig

if TYPE_CHECKING:  # the kinds are the registry's keys: a Literal of them exists only at run time, where pydantic checks it
    ReflectorName = str
else:
    ReflectorName = Literal[REFLECTOR_NAMES]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SplitConfig(_Section):
    test_fraction: float = Field(0.3, gt=0, lt=1, description="held-out questions, per category")
    static_size: int = Field(12, gt=0, description="validation questions that give the fitness J")
    rotating_size: int = Field(5, ge=0, description="re-chosen every iteration; failure cases only")
    train_ratio: float = Field(2.0, gt=0, description="texts written = ratio x static size (facility location), "
                               "never fewer than the texts holding the static questions' evidence")
    confirmation_size: int = Field(12, ge=0, description="validation questions kept out of the static and rotating "
                                   "sets, to settle a close call between the best and a contender at the end")
    test_texts: int | None = Field(None, gt=0, description="texts written for the held-out test: those holding the test "
                                   "questions' evidence, then those covering them (facility location); default every text")


class ParetoConfig(_Section):
    objectives: Literal["items", "categories"] = Field(
        "items", description="what a member must not be beaten on to be a parent: every static question (GEPA's "
        "choice) or every category's mean over them")
    cost: bool = Field(False, description="the tokens a member's evaluation took as one more objective, fewer "
                       "being better (nothing offline: the offline agent takes none)")


class CascadeConfig(_Section):
    """Cascade evaluation (mstar_ray.search.cascade): a program is first evaluated on a slice of the static set,
    and goes on to the full evaluation only if it can still be worth it."""

    slice_size: int = Field(6, gt=0, description="static questions in the slice (one per k-means cluster of the "
                            "static questions); their evidence and train_ratio x slice_size texts are written")
    rule: Literal["parent", "quantile"] = Field(
        "parent", description="parent: go on if the slice score is at least the parent's on the slice less margin; "
        "quantile: if it is at least that quantile of the population's slice scores")
    margin: float = Field(0.05, ge=0, le=1, description="rule parent: how far below its parent's slice score a child "
                          "may fall and still go on")
    quantile: float = Field(0.5, ge=0, le=1, description="rule quantile: the population's slice-score quantile to reach")


class GuidanceConfig(_Section):
    """Evolving reflector instructions (mstar_ray.reflect.guidance): a small population of instruction texts, each
    reflection drawing one; every rewrite_every judged reflections the worst is rewritten from the best."""

    size: int = Field(4, ge=2, le=len(SEED_GUIDANCE), description="instruction texts in the population")
    rewrite_every: int = Field(6, gt=0, description="judged reflections between two rewrites of the worst text")
    exploration: float = Field(1.0, ge=0, description="weight of the draw's bonus for a text with few judged "
                               "reflections (0: always the best so far)")


class SearchConfig(_Section):
    seeds: list[str] = Field(default_factory=lambda: list(library.PAPER_SEEDS), min_length=1,
                             description="library names (mstar-ray seeds) or paths to program files; a relative "
                             "path is looked up from the config file's folder, then the working directory")
    seed: int = Field(0, description="every random choice of the run derives from it")
    max_candidates: int | None = Field(20, gt=0, description="children to evaluate (seeds, discards and "
                                       "duplicates not counted); without max_iterations, at most 5 reflections each")
    max_iterations: int | None = Field(None, gt=0, description="reflections to start")
    max_wall_s: float | None = Field(None, gt=0, description="seconds of wall time after which no new work starts")
    parent_selection: ParentSelection = Field(
        "softmax", description="softmax over static scores (tau); greedy; chain; pareto: among the members no other "
        "beats on every objective (search.pareto), weighted by how many objectives each is best on; seeds: a seed "
        "drawn uniformly, crossing over only with seeds (best-of-N, no evolution: the ablation's baseline)")
    pareto: ParetoConfig = Field(ParetoConfig(), description="the objectives of parent_selection: pareto")
    tau: float = Field(0.15, gt=0, description="temperature of the softmax over static scores (lower: greedier)")
    frozen_code: bool = Field(False, description="ablation: the reflector may change only the instructions")
    frozen_instructions: bool = Field(False, description="ablation: the reflector may change only the code")
    reflections_in_flight: int = Field(1, gt=0, description="R")
    evaluations_in_flight: int = Field(2, gt=0, description="E")
    max_repairs: int = Field(3, ge=0, description="repair rounds for a child that fails its checks or smoke test, "
                             "then it is discarded")
    runtime_fix: bool = Field(True, description="send a child that broke the contract at run time back for a fix")
    reflector: ReflectorName = Field("offline", description=reflectors.describe())
    ensemble: dict[ReflectorName, Annotated[float, Field(ge=0)]] | None = Field(
        None, description="offline stand-ins as an ensemble's arms: reflector kinds that need no model (e.g. offline, "
        "offline-random), each with a nominal price in USD per reflection; each reflection picks one by the bandit "
        "that picks among llm.reflector's models (improvement per dollar); search.reflector must be one of them "
        "(the arm of a request naming none); none (the default): search.reflector answers every reflection")
    guidance: GuidanceConfig | None = Field(None, description="evolve the reflector's instructions; none (the "
                                            "default): one fixed instruction")
    judge_on: Literal["test", "all"] = Field("test", description="where the llm.judge adds its verdict to question "
                                             "answering (if configured); a rubric task's criteria it judges everywhere")
    attribution: bool = Field(True, description="attribute each failed item with evidence to storage, retrieval or "
                              "answering (one oracle read per failure whose evidence is missing), for the reflector")
    cascade: CascadeConfig | None = Field(None, description="screen every program on a slice of the static set "
                                          "before its full evaluation; none (the default): every program is "
                                          "evaluated fully")
    dedup: bool = Field(True, description="a child structurally identical to a program already queued is not "
                        "evaluated again; its score is reused")
    structure_level: Literal["exact", "names", "shape"] = Field(
        "names", description="abstraction of the trees that novelty and the structural clusters compare: exact keeps "
        "identifiers and literals, names abstracts literals, shape abstracts both")

    @model_validator(mode="after")
    def _some_budget(self) -> SearchConfig:
        if self.max_candidates is None and self.max_iterations is None and self.max_wall_s is None:
            raise ValueError("set at least one of max_candidates, max_iterations, max_wall_s")
        if self.frozen_code and self.frozen_instructions:
            raise ValueError("frozen_code and frozen_instructions together leave nothing to change")
        if self.ensemble is not None:
            if len(self.ensemble) < 2:
                raise ValueError("ensemble needs two reflector kinds or more (one is search.reflector alone)")
            model_kinds = [k for k in self.ensemble if reflectors.reflector_class(k).needs_model]
            if model_kinds:
                raise ValueError(f"ensemble lists {', '.join(model_kinds)}, which need a model: an ensemble of models "
                                 "is llm.reflector's list (search.ensemble is the offline stand-ins')")
            if self.reflector not in self.ensemble:
                raise ValueError(f"reflector is {self.reflector!r} but ensemble lists {', '.join(self.ensemble)}: "
                                 "search.reflector must be one of them")
        return self


class RayConfig(_Section):
    address: str | None = Field(None, description="auto, ray://HOST:PORT, or none for a local Ray")
    num_cpus: int | None = Field(None, gt=0, description="local Ray only; default: this machine's CPUs")
    evaluator_cpus: float = Field(1.0, gt=0, description="an evaluation keeps one sandbox process busy")
    reflector_cpus: float = Field(0.0, ge=0, description="reflectors mostly wait on a model; their smoke tests are short")
    evaluator_resources: dict[str, float] = Field(default_factory=dict, description="e.g. {evaluator: 1}")
    max_restarts: int = Field(3, ge=0, description="per actor; its work is re-issued after a restart")


class RunConfig(_Section):
    task: TaskConfig = SyntheticOptions()
    split: SplitConfig = SplitConfig()
    search: SearchConfig = SearchConfig()
    llm: LLMSettings = LLMSettings()
    sandbox: SandboxLimits = SandboxLimits()
    evaluation: EvalConcurrency = EvalConcurrency()
    ray: RayConfig = RayConfig()
    serve: ServeConfig = ServeConfig()

    def stored(self) -> dict[str, Any]:
        """The config as a run directory keeps it (``config.yaml``): everything, but what the run learns at start
        when the config leaves it unset (each endpoint's ``max_concurrency``, ``evaluation.in_flight`` and
        ``queries_ahead``) stays unset there, so a resume or a transfer learns it again rather than reading the
        default as the user's."""
        llm: dict[str, Any] = {role: {"max_concurrency"} for role in ("task", "toolkit", "judge")
                               if getattr(self.llm, role) is not None and not getattr(self.llm, role).concurrency_set}
        unset = {i for i, config in enumerate(self.llm.reflectors()) if not config.concurrency_set}
        if unset:
            llm["reflector"] = ({i: {"max_concurrency"} for i in unset} if isinstance(self.llm.reflector, list)
                                else {"max_concurrency"})
        exclude: dict[str, Any] = {"llm": llm} if llm else {}
        learned = {"in_flight", "queries_ahead"} - self.evaluation.model_fields_set
        if learned:
            exclude["evaluation"] = learned
        return self.model_dump(mode="json", exclude=exclude)

    def reflector_arms(self) -> list[str]:
        """The arms an ensemble's bandit chooses each reflection's reflector among, in order: the offline
        stand-ins of ``search.ensemble``, or the models of an ``llm.reflector`` list for a kind that needs a
        model; none when one reflector answers every reflection."""
        if self.search.ensemble is not None:
            return list(self.search.ensemble)
        if not reflectors.reflector_class(self.search.reflector).needs_model:
            return []
        models = [c.model for c in self.llm.reflectors() if c.model is not None]  # the config requires each
        return models if len(models) > 1 else []

    @model_validator(mode="after")
    def _roles_present(self) -> RunConfig:
        if reflectors.reflector_class(self.search.reflector).needs_model and self.llm.reflector is None:
            raise ValueError(f"search.reflector is {self.search.reflector!r} but llm.reflector is not configured")
        served = [m.name for m in self.serve.models]
        for role, name in self.llm.served().items():
            if name not in served:
                known = f"the serve section has {', '.join(served)}" if served else "the serve section has no models"
                raise ValueError(f"llm.{role}.served: {name!r} is not a model of serve.models ({known})")
        cascade = self.search.cascade
        if cascade is not None and cascade.slice_size >= self.split.static_size:
            raise ValueError(f"search.cascade.slice_size ({cascade.slice_size}) must be smaller than split.static_size "
                             f"({self.split.static_size}): the slice is a part of the static set")
        return self


def load_run_config(path: str | Path) -> RunConfig:
    """The config at ``path``; a task adapter's relative file is made absolute (looked up from the config
    file's folder, then the working directory), so that the run directory's copy names the same file."""
    config = load_yaml(RunConfig, path)
    if isinstance(config.task, AdapterTask):
        try:
            adapter = resolve_file(config.task.adapter, Path(path).resolve().parent)
        except AdapterError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        config = config.model_copy(update={"task": config.task.model_copy(update={"adapter": adapter})})
    return config


def check_served_models(config: RunConfig, config_path: str | Path) -> None:
    """Every llama.cpp model file of the serve section exists here (the driver's machine; each replica looks
    again on its node), before Ray starts: ``ConfigError`` naming each key that names a missing one."""
    from mstar_ray.serve.model_file import gguf_file

    problems = []
    for index, model in enumerate(config.serve.models):
        if model.runtime == "llama_cpp":
            try:
                gguf_file(model.model)
            except FileNotFoundError as exc:
                problems.append(f"serve.models[{index}].model ({model.name}): {exc}")
    if problems:
        raise ConfigError(f"{config_path}: " + "; ".join(problems))


class SeedsBreakContract(ContractError):
    """Seeds that break the contract: the message names each seed, rule and line, and the run does not start."""

    def __init__(self, config_path: str | Path, broken: list[tuple[int, str, list[Violation]]]):
        parts = [f"search.seeds[{i}]: {ContractError(violations, seed)}" for i, seed, violations in broken]
        ValueError.__init__(self, f"{config_path}: " + "\n".join(parts))
        self.violations = [v for _, _, violations in broken for v in violations]


def resolve_seeds(config: RunConfig, config_path: str | Path) -> list[Path]:
    """The program file of every ``search.seeds`` entry, each checked against the contract. Every problem is
    reported at once: unknown names and missing files (``ConfigError``), then programs that break the
    contract (``SeedsBreakContract``)."""
    config_dir = Path(config_path).resolve().parent
    paths, problems = [], []
    for seed in config.search.seeds:
        try:
            paths.append(library.resolve(seed, config_dir))
        except (library.UnknownSeed, FileNotFoundError) as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError(f"{config_path}: search.seeds: " + "; ".join(problems))
    broken = []
    for index, (seed, path) in enumerate(zip(config.search.seeds, paths)):
        violations = check_source(path.read_text(encoding="utf-8"))
        if violations:
            broken.append((index, seed, violations))
    if broken:
        raise SeedsBreakContract(config_path, broken)
    return paths
