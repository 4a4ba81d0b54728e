"""How a search divides its task (docs/design.md section 4): held-out test questions; from the rest, a fixed static
set (the fitness), a confirmation slice (kept fresh to settle a close call between two programs), a
rotating set re-chosen every iteration (failure cases), and the training texts written into memory.

The training texts always include the texts holding the static questions' evidence, and for each
iteration those holding the rotating questions' evidence (where the task says which texts hold it);
facility location over the static questions fills the rest of the budget. They are written in the
task's own order, as the test writes every text: a memory sees the conversation as it happened.

Everything follows from the run seed and the embeddings, so a resumed run rebuilds the same split.
"""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel

from mstar_ray.embedding.embedder import Embedder
from mstar_ray.search.subsets import choose_validation_split, facility_location, rotating_set
from mstar_ray.tasks.model import Item, RawText, Task


class Split(BaseModel):
    test: list[str]  # question ids, held out until the end
    validation: list[str]  # question ids the search may look at
    static: list[str]  # subset of validation: the fitness J
    confirmation: list[str] = []  # validation, never static or rotating: a fresh slice to confirm a close call
    train_texts: list[str]  # text ids written for every search evaluation, in the task's order
    evidence_texts: list[str] = []  # those of train_texts that hold the static questions' evidence
    static_evidence: float | None = None  # share of the static questions' evidence units in train_texts
    test_texts: list[str] = []  # text ids written for the held-out test, in the task's order; empty: every text
    screen: list[str] = []  # the cascade's slice of the static set (search.cascade); empty: no cascade
    screen_texts: list[str] = []  # text ids written for a screening on the slice, in the task's order

    def scoring(self) -> frozenset[str]:
        """The questions whose answers score a program (the fitness, the confirmation, the test): a reflector
        is never shown their answers, or it could write them into the program."""
        return frozenset(self.static) | frozenset(self.confirmation) | frozenset(self.test)


def held_out(questions: list[Item], fraction: float, seed: int) -> list[str]:
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


def confirmation_slice(candidates: list[str], size: int, rotating_size: int, seed: int) -> list[str]:
    """A seeded sample of the validation questions left after the static set; it leaves the rotating set at
    least ``rotating_size`` questions to choose from."""
    count = min(size, max(0, len(candidates) - rotating_size))
    return sorted(random.Random(f"confirmation:{seed}").sample(sorted(candidates), count))


def covering_texts(task: Task, questions: list[Item], embedder: Embedder, count: int) -> list[RawText]:
    """The texts to write so that ``questions`` can be answered from about ``count`` of them, in the task's
    order: every text holding their evidence (where the task says), then the texts that best cover the
    questions (facility location, as the search fills its training texts) up to ``count``; all the task's
    texts when ``count`` is not smaller."""
    if count >= len(task.texts):
        return list(task.texts)
    if not questions:
        raise ValueError("no questions to choose the texts for")
    holders = task.evidence_holders()
    index = {t.id: i for i, t in enumerate(task.texts)}
    required = sorted({index[holders[u]] for q in questions for u in q.evidence if u in holders})
    question_vectors = np.asarray(embedder.embed([q.question for q in questions]), dtype=np.float64)
    text_vectors = np.asarray(embedder.embed([t.text for t in task.texts]), dtype=np.float64)
    chosen = facility_location(question_vectors, text_vectors, count, given=required)
    return [task.texts[i] for i in sorted(chosen)]


class SplitPlan:
    """The split plus what is needed to re-choose the rotating set, and the texts to write, each iteration."""

    def __init__(self, task: Task, embedder: Embedder, *, test_fraction: float, static_size: int,
                 rotating_size: int, train_ratio: float, seed: int, confirmation_size: int = 0,
                 test_texts: int | None = None, screen_size: int = 0):
        self.task = task
        self.seed = seed
        self.rotating_size = rotating_size
        # A task that holds out its own test items (unseen games) keeps them; else a share of every category.
        test = set(task.test_ids) if task.test_ids else set(held_out(task.items, test_fraction, seed))
        self._validation = [q for q in task.items if q.id not in test]
        if not self._validation:
            raise ValueError(f"task {task.name}: no validation questions left after holding out the test set")
        self._questions = {q.id: q for q in task.items}
        self._holders = task.evidence_holders()
        self._order = {t.id: i for i, t in enumerate(task.texts)}
        self._vectors = np.asarray(embedder.embed([q.question for q in self._validation]), dtype=np.float64)
        text_vectors = np.asarray(embedder.embed([t.text for t in task.texts]), dtype=np.float64)
        # The fitness is chosen among the questions that may be scored: a task's training questions only ever
        # serve as failure cases (rotating), never as the static set or its confirmation.
        training = set(task.train_ids)
        scorable = [i for i, q in enumerate(self._validation) if q.id not in training]
        if not scorable:
            raise ValueError(f"task {task.name}: every validation question is marked for training; none can score")
        evidence = [[self._order[t] for t in self.evidence_texts([self._validation[i].id])] for i in scorable]
        static_idx, train_idx = choose_validation_split(
            self._vectors[scorable], text_vectors, static_size=static_size, ratio=train_ratio, seed=seed,
            evidence=evidence,
        )
        static_idx = [scorable[i] for i in static_idx]
        static = [self._validation[i].id for i in static_idx]
        confirmation = confirmation_slice([q.id for q in self._validation if q.id not in set(static) | training],
                                          confirmation_size, rotating_size, seed)
        self._excluded = set(static_idx) | {i for i, q in enumerate(self._validation) if q.id in set(confirmation)}
        self._rotating: dict[int, list[str]] = {}
        train = self._in_order(task.texts[i].id for i in train_idx)
        tested = [q for q in task.items if q.id in test]
        screen, screen_texts = [], []
        if screen_size:
            # The slice is chosen from the static set as the static set is from the validation questions: one per
            # k-means cluster, with its evidence and facility location filling train_ratio x its size in texts.
            slice_idx, slice_texts = choose_validation_split(
                self._vectors[static_idx], text_vectors, static_size=screen_size, ratio=train_ratio, seed=seed,
                evidence=[evidence[i] for i in static_idx])
            screen = [static[i] for i in slice_idx]
            screen_texts = self._in_order(task.texts[i].id for i in slice_texts)
        self.split = Split(
            test=sorted(test),
            validation=[q.id for q in self._validation],
            static=static,
            confirmation=confirmation,
            train_texts=train,
            evidence_texts=self.evidence_texts(static),
            static_evidence=self.evidence_share(train, static)[0],
            test_texts=[t.id for t in covering_texts(task, tested, embedder, test_texts)]
            if test_texts is not None and tested and test_texts < len(task.texts) else [],
            screen=screen,
            screen_texts=screen_texts,
        )

    def _in_order(self, text_ids: Iterable[str]) -> list[str]:
        return sorted(set(text_ids), key=self._order.__getitem__)

    def evidence_texts(self, question_ids: list[str]) -> list[str]:
        """The texts holding the evidence of these questions, in the task's order (evidence the task cannot
        place is skipped)."""
        units = [u for q in question_ids for u in self._questions[q].evidence]
        return self._in_order(self._holders[u] for u in units if u in self._holders)

    def evidence_share(self, written: list[str], question_ids: list[str]) -> tuple[float | None, int, int]:
        """(share, units in memory, units) of these questions' evidence units whose text is in ``written``;
        the share is None when the questions cite no evidence."""
        present = set(written)
        units = [u for q in question_ids for u in self._questions[q].evidence]
        held = sum(1 for u in units if self._holders.get(u) in present)
        return (held / len(units) if units else None), held, len(units)

    def rotating(self, iteration: int) -> list[str]:
        """Asked for each evaluation and again for its results: a k-means per iteration is done once."""
        if self.rotating_size == 0:
            return []
        if iteration not in self._rotating:
            chosen = rotating_set(self._vectors, self.rotating_size, exclude=self._excluded, iteration=iteration,
                                  seed=self.seed)
            self._rotating[iteration] = [self._validation[i].id for i in chosen]
        return self._rotating[iteration]

    def written(self, question_ids: list[str]) -> list[str]:
        """The texts an evaluation on these questions writes: the training texts plus the texts holding
        the questions' evidence, in the task's order."""
        return self._in_order([*self.split.train_texts, *self.evidence_texts(question_ids)])
