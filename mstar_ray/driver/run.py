"""``mstar-ray run``: read the config, check every endpoint, start or join Ray, search, report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mstar_ray.actors.wiring import fitted_evaluation, probe_endpoints
from mstar_ray.driver.progress import Progress
from mstar_ray.driver.run_dir import RunDir
from mstar_ray.exit_codes import ANNOUNCED, EXIT_ENDPOINT, EXIT_OK, InputError, MissingInput, Terminated, resume_line
from mstar_ray.families import family
from mstar_ray.llm.errors import EndpointError
from mstar_ray.run_config import check_served_models, load_run_config, resolve_seeds
from mstar_ray.runlog import layout
from mstar_ray.search.noise import bootstrap_interval
from mstar_ray.state.candidate import Seed
from mstar_ray.families.task_registry import task_from_config

if TYPE_CHECKING:
    from mstar_ray.driver.serving import RunServing
    from mstar_ray.run_config import RunConfig
    from mstar_ray.search.jobs import EvalOutcome
    from mstar_ray.search.population import Member


def run_search(config_path: str | None, *, run_dir: str, address: str | None, resume: bool = False) -> int:
    import ray

    from mstar_ray.driver.cluster import connect
    from mstar_ray.driver.resume import merge_resume_config
    from mstar_ray.state.replay import restore
    from mstar_ray.search_loop.policy import FatalRunError
    from mstar_ray.driver.search_driver import SearchDriver

    restored = None
    if resume:
        stored_path = Path(run_dir) / layout.CONFIG
        if not stored_path.is_file():
            raise MissingInput(f"{run_dir} is not a run directory: no {layout.CONFIG}")
        config = merge_resume_config(load_run_config(stored_path),
                                     load_run_config(config_path) if config_path else None)
        seeds = RunDir(run_dir).read_seeds()
        restored = restore(Path(run_dir))
    else:
        if config_path is None:
            raise InputError("give a config file, or --resume RUN_DIR")
        config = load_run_config(config_path)
        seeds = [Seed(name=path.stem, source=path.read_text(encoding="utf-8"))
                 for path in resolve_seeds(config, config_path)]
    check_served_models(config, config_path or run_dir)
    task = task_from_config(config.task)
    family(task.family)  # an unknown family, or a user's named as a package's, is refused before anything starts
    progress = Progress()
    serving = _serving(config, progress) if config.serve.models else None
    try:
        llm = config.llm
        if serving is not None:  # Ray first: the served models are deployed before any endpoint is probed
            connect(config, address)
            llm = serving.start(local_ray=not (address or config.ray.address))
        # Before anything is started or spent. The timeouts it measures are for this process's run only:
        # config.yaml keeps the config as written, so a resume measures again (the machine may have changed).
        measured = probe_endpoints(llm, progress.message)
        directory = RunDir(run_dir)
        if not resume:  # before config.yaml, which marks a run directory: a resumable run always has its seeds
            directory.write_seeds(seeds)
            directory.write_config(config)
        written, config = config, config.model_copy(update={
            "llm": measured, "evaluation": fitted_evaluation(config.evaluation, measured, progress.message)})
        resources = connect(config, address)
        if resume:  # a new budget is the run's once it goes on: a resume that cannot start keeps the stored one
            directory.write_config(written)
        progress.message(f"run directory {directory.path}; Ray: {resources.get('CPU', 0):g} CPUs")
        if serving is not None:
            serving.log_to(directory)
        driver = SearchDriver(config, seeds, task, directory, progress,
                              watch=serving.watch if serving else None, held=serving.held() if serving else None)
        try:
            result = driver.run(restored)
        except FatalRunError as exc:
            directory.event("stopped", detail=f"error: {exc}")
            _stop(serving)
            directory.close()
            progress.message(f"error: {exc}\nfinished work is kept in {directory.path}")
            return EXIT_ENDPOINT
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: what is in flight is abandoned, a resume re-issues it
            what = "SIGTERM" if isinstance(exc, Terminated) else "Ctrl-C"
            directory.event("stopped", detail=f"interrupted by {what}")
            directory.close()
            # Said before Ray and the served models are shut down, which takes seconds: `ray job stop` kills a
            # job's driver 3 s after its SIGTERM, and the line must be in the job's log by then.
            progress.message(resume_line(what, directory.path))
            exc.add_note(ANNOUNCED)
            _stop(serving)
            raise
    finally:
        _stop(serving)
        ray.shutdown()

    def described(member: Member) -> dict[str, Any]:
        test = result.tests.get(member.id)
        return {"id": member.id, "origin": member.origin, "commit_message": member.commit_message,
                "static_score": member.score, "static_interval": list(driver.policy.incumbent.interval(member)),
                "test_score": test.static_score if test else None,
                "test_interval": _test_interval(test, driver.plan.split.test, config.search.seed) if test else None,
                "test_categories": {c: s.score for c, s in test.report.categories.items()} if test else None,
                "test_judge": test.report.judge_score if test else None,
                # why its confirmation or test broke the contract or has no result (the selection says what followed)
                "failure_after_search": (result.side_failures or {}).get(member.id)}

    split = driver.plan.split
    counts = driver.policy.state  # every count of the search, once
    summary = {
        # what the scores are, as every evaluation of this run reports it (a stand-in grader names itself)
        "metric": family(task.family).metric_for(judged=config.llm.judge is not None),
        "best": described(result.best),
        "best_seed": described(result.best_seed),
        "selection": result.selection.model_dump(),
        "static_evidence_in_memory": split.static_evidence,
        "texts": {"granularity": getattr(config.task, "granularity", "session"), "total": len(task.texts), "written_in_search": len(split.train_texts)},
        "candidates_evaluated": counts.evaluated, "discarded": counts.discarded, "violations": counts.violations,
        "wall_seconds": round(result.wall_s, 1), "stop_reason": result.stop_reason,
        "cost_usd": driver.shown.cost_usd, "tokens": driver.shown.tokens,
        "duplicates": counts.duplicates, "screened_out": counts.screened_out,
        # the clusters of structurally similar programs (the report's map); summaries before issue 46 call it
        # "structural_families", which read as task families: nothing reads the key back, so both stay readable
        "structural_clusters": len(result.population_map.medoids) if result.population_map else None,
    }
    directory.write_summary(summary)
    directory.write_best(result.best.source)
    directory.close()
    return EXIT_OK


def _test_interval(test: EvalOutcome, question_ids: list[str], seed: int) -> list[float]:
    """The bootstrap interval of the test score, over the held-out questions as the static one is."""
    by_id = {r.id: r.score for r in test.report.results}
    return list(bootstrap_interval([by_id.get(q, 0.0) for q in question_ids], seed=seed))


def _serving(config: RunConfig, progress: Progress) -> RunServing:
    """The run's served models; Ray Serve is imported only by a run that has some (the ``serve`` extra)."""
    try:
        from mstar_ray.driver.serving import RunServing
    except ImportError as exc:
        raise EndpointError(f"serve.models needs Ray Serve, which is not installed ({exc}): pip install "
                            "'mstar-ray[serve]'") from None
    return RunServing(config, progress.message)


def _stop(serving: RunServing | None) -> None:
    """Shut the served models down (or keep them) whichever way the run ends; a second call does nothing, so
    the error path can do it before it closes the run directory's logs."""
    if serving is not None:
        serving.stop()
