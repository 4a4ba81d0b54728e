"""Question answering: the question is the query's source, the agent answers from the context, token F1
against the gold answer (SQuAD-normalised), and, where a judge is configured and asked for, its verdict."""

from __future__ import annotations

from mstar_ray.families.base import ItemRun
from mstar_ray.results import ItemResult
from mstar_ray.tasks.judge import Judge
from mstar_ray.tasks.model import Item
from mstar_ray.tasks.scoring import token_f1


class QuestionAnswering:
    name = "qa"
    steps = ("answer",)
    reads_once = True  # items can run at once, their reads kept in item order (mstar_ray.agent.pipeline)
    brief = "The agent answers each question from read()'s output alone; answers are scored by token F1."

    def metric_for(self, judged: bool) -> str:
        return "token F1"  # the judge's verdict, where asked for, is reported beside it

    def run(self, item: Item, run: ItemRun) -> ItemResult:
        recall = run.memory.recall(item.question)
        result = ItemResult.of(item, query=recall.query, seconds=recall.seconds)
        if recall.error is not None:
            result.error = recall.error
            return result
        result.context = recall.context
        run.calls["answer"] += 1
        result.prediction = run.agent.answer(run.response_instruction, run.always_on, recall.context, item.question)
        result.score = token_f1(result.prediction, item.answer)
        if run.verdicts and run.judge is not None:
            result.judge = Judge(run.judge)(item.question, item.answer, result.prediction)
        return result
