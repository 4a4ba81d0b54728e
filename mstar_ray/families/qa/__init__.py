"""Question answering: the question is the query's source, the agent answers from the context, token F1
against the gold answer (SQuAD-normalised), and, where a judge is configured and asked for, its verdict."""

from __future__ import annotations

from mstar_ray.families.base import ItemRun, Overlap
from mstar_ray.families.qa import offline
from mstar_ray.families.step import Messages, Shown, Step
from mstar_ray.results import ItemResult
from mstar_ray.families.qa.judge import Judge
from mstar_ray.tasks.model import Item
from mstar_ray.families.qa.scoring import token_f1

ANSWER_MAX_TOKENS = 64


def answer_prompt(shown: Shown, question: str) -> Messages:
    parts = [p for p in (shown.always_on.strip(), f"Memory:\n{shown.context}" if shown.context else "Memory: (empty)") if p]
    prompt = "\n\n".join(parts + [shown.instruction, f"Question: {question}\nAnswer:"])
    return [{"role": "user", "content": prompt}]


def first_line(reply: str, question: str) -> str:
    """A short answer is the reply's first line: what a model adds after it is talk."""
    return reply.strip().splitlines()[0].strip() if reply.strip() else ""


ANSWER = Step("answer", prompt=answer_prompt, parse=first_line, offline=offline.answer, max_tokens=ANSWER_MAX_TOKENS)


class QuestionAnswering:
    name = "qa"
    steps = (ANSWER.name,)
    overlap = Overlap(across_items=True)  # one read per item, at its start
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
        result.prediction = run.ask(ANSWER, recall.context, item.question)
        result.score = token_f1(result.prediction, item.answer)
        if run.verdicts and run.judge is not None:
            result.judge = Judge(run.judge)(item.question, item.answer, result.prediction)
        return result
