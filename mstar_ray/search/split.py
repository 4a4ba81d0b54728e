"""How a search divides its task (SPEC section 4): held-out test questions; from the rest, a fixed static
set (the fitness), a rotating set re-chosen every iteration (failure cases), and the training texts that
are written into memory (facility location over the static questions).

Everything follows from the run seed and the embeddings, so a resumed run rebuilds the same split.
"""

from __future__ import annotations

import random

import numpy as np
from pydantic import BaseModel

from mstar_ray.agent.backend import Embedder
from mstar_ray.search.subsets import choose_validation_split, facility_location, rotating_set
from mstar_ray.tasks.model import Question, RawText, Task


class Split(BaseModel):
    test: list[str]  # question ids, held out until the end
    validation: list[str]  # question ids the search may look at
    static: list[str]  # subset of validation: the fitness J
    train_texts: list[str]  # text ids written into memory during the search, in greedy order
    test_texts: list[str] = []  # text ids written for the held-out test; empty: every text


def held_out(questions: list[Question], fraction: float, seed: int) -> list[str]:
    """Per category, a seeded ``fraction`` of the questions (at least one where a category has two or more)."""
    by_category: dict[str, list[str]] = {}
    for question in questions:
        by_category.setdefault(question.category, []).append(question.id)
    rng = random.Random(f"test-split:{seed}")
    chosen: list[str] = []
    for category in sorted(by_category):
        ids = sorted(by_category[category])
        rng.shuffle(ids)
        count = round(fraction * len(ids))
        if len(ids) >= 2:
            count = min(max(count, 1), len(ids) - 1)
        chosen += ids[:count]
    return sorted(chosen)


def covering_texts(texts: list[RawText], questions: list[Question], embedder: Embedder, count: int) -> list[RawText]:
    """The ``count`` texts that best cover ``questions`` (facility location, as the search chooses its
    training texts), in greedy order; all of them when ``count`` is not smaller."""
    if count >= len(texts):
        return list(texts)
    if not questions:
        raise ValueError("no questions to choose the texts for")
    question_vectors = np.asarray(embedder.embed([q.question for q in questions]), dtype=np.float64)
    text_vectors = np.asarray(embedder.embed([t.text for t in texts]), dtype=np.float64)
    return [texts[i] for i in facility_location(question_vectors, text_vectors, count)]


class SplitPlan:
    """The split plus the question vectors needed to re-choose the rotating set each iteration."""

    def __init__(self, task: Task, embedder: Embedder, *, test_fraction: float, static_size: int,
                 rotating_size: int, train_ratio: float, seed: int, test_texts: int | None = None):
        self.task = task
        self.seed = seed
        self.rotating_size = rotating_size
        test = set(held_out(task.questions, test_fraction, seed))
        self._validation = [q for q in task.questions if q.id not in test]
        if not self._validation:
            raise ValueError(f"task {task.name}: no validation questions left after holding out the test set")
        self._vectors = np.asarray(embedder.embed([q.question for q in self._validation]), dtype=np.float64)
        text_vectors = np.asarray(embedder.embed([t.text for t in task.texts]), dtype=np.float64)
        static_idx, train_idx = choose_validation_split(
            self._vectors, text_vectors, static_size=static_size, ratio=train_ratio, seed=seed
        )
        self._static_idx = static_idx
        self._rotating: dict[int, list[str]] = {}
        chosen_for_test: list[int] = []
        tested = [q.question for q in task.questions if q.id in test]
        if test_texts is not None and tested and test_texts < len(task.texts):
            chosen_for_test = facility_location(np.asarray(embedder.embed(tested), dtype=np.float64), text_vectors,
                                                test_texts)
        self.split = Split(
            test=sorted(test),
            validation=[q.id for q in self._validation],
            static=[self._validation[i].id for i in static_idx],
            train_texts=[task.texts[i].id for i in train_idx],
            test_texts=[task.texts[i].id for i in chosen_for_test],
        )

    def rotating(self, iteration: int) -> list[str]:
        """Asked for each evaluation and again for its results: a k-means per iteration is done once."""
        if self.rotating_size == 0:
            return []
        if iteration not in self._rotating:
            chosen = rotating_set(self._vectors, self.rotating_size, exclude=self._static_idx, iteration=iteration,
                                  seed=self.seed)
            self._rotating[iteration] = [self._validation[i].id for i in chosen]
        return self._rotating[iteration]
