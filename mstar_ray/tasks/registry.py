"""One entry point that turns a task name plus options into a :class:`Task`."""

from __future__ import annotations

import logging

from mstar_ray.tasks.dialogue import Granularity
from mstar_ray.tasks.model import Task, limit_questions

logger = logging.getLogger(__name__)

TASK_NAMES: tuple[str, ...] = ("locomo", "synthetic", "beam")


def load_task(
    name: str,
    *,
    conversation: int = 0,
    limit: int | None = None,
    data_path: str | None = None,
    seed: int = 0,
    categories: tuple[int, ...] | None = None,
    granularity: Granularity = "session",
    size: str = "100K",
) -> Task:
    """Build the named task.

    ``granularity`` cuts a dialogue into raw texts: one per session (the default, as the M* paper) or
    one per turn (``mstar_ray.tasks.dialogue``); BEAM's texts are always one message each. Options that do
    not apply to the chosen task (``conversation``, ``data_path`` and ``categories`` for ``synthetic``;
    ``seed`` for ``locomo`` and ``beam``; ``size`` but for ``beam``) are ignored, so one config shape can
    drive any task. ``categories`` are LoCoMo's numeric categories; ``None`` means the default 1-4. For
    ``beam``, ``data_path`` is the directory holding BEAM's chats and ``size`` its conversation size.
    """
    key = name.strip().lower()
    # Imported here so that picking one task never pays for (or breaks on) the other's module.
    if key == "locomo":
        from mstar_ray.tasks.locomo import DEFAULT_CATEGORIES, load_locomo

        return load_locomo(
            data_path,
            conversation=conversation,
            categories=DEFAULT_CATEGORIES if categories is None else tuple(categories),
            limit=limit,
            granularity=granularity,
        )
    if key == "beam":
        from mstar_ray.tasks.beam import load_beam

        return load_beam(data_path, size=size, conversation=conversation, limit=limit)
    if key == "synthetic":
        from mstar_ray.tasks.synthetic import make_synthetic

        if conversation != 0 or data_path is not None or categories is not None:
            logger.debug("synthetic task ignores conversation, data_path and categories")
        task = make_synthetic(seed=seed, granularity=granularity)
        return task.model_copy(update={"questions": limit_questions(task.questions, limit)})
    raise ValueError(f"unknown task {name!r}; valid task names: {', '.join(TASK_NAMES)}")
