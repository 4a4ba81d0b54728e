"""Rubric-graded answers (HealthBench, PRBench): the agent writes a full response to a conversation from what
memory recalls for its end, each rubric criterion is judged met or not, and the item scores HealthBench's
points met over positive points, clipped to [0, 1] (``mstar_ray.families.rubric.conversations``).

Memory is asked once per item, from ``Item.question``: the conversation's end (its last user message and what
came before it, up to ``rubric.conversations.RECALL_CHARS``). The response sees the whole conversation. The criteria are
judged by the run's judge model, or, when none is configured, by the offline stand-in grader, whose name is in
the metric and in every trace (``graders``). The trace lists every criterion with its points and verdict,
what cost points first, for the reflector.
"""

from __future__ import annotations

from mstar_ray.families.base import ItemRun, Overlap
from mstar_ray.families.rubric import offline
from mstar_ray.families.rubric.graders import STAND_IN_LABEL, Grader, Verdict, grader_for
from mstar_ray.families.step import Messages, Shown, Step
from mstar_ray.results import ItemResult
from mstar_ray.tasks.model import Item
from mstar_ray.families.rubric.conversations import Criterion, Message, RubricSpec, bounded_messages, conversation_text, rubric_score

METRIC = "rubric score (points of the criteria met over the positive points, clipped to [0, 1])"
JUDGE_CONVERSATION_CHARS = 8000  # of the conversation shown to the judge: its end, where the question is
TRACE_TEXT_CHARS = 160
RESPONSE_CONVERSATION_CHARS = 12000  # the conversation's end, beside up to 3,000 characters of memory
RESPOND_ROLE = "You are the assistant in the conversation that follows. Write your next message to the user, in full."


def respond_prompt(shown: Shown, messages: list[Message]) -> Messages:
    kept = bounded_messages(messages, RESPONSE_CONVERSATION_CHARS)
    # The conversation's own system messages join ours: chat templates take one system message, first.
    own = [m.content for m in kept if m.role == "system"]
    memory = f"Memory:\n{shown.context}" if shown.context else "Memory: (empty)"
    system = "\n\n".join(p for p in (RESPOND_ROLE, *own, shown.always_on.strip(), memory, shown.instruction.strip()) if p)
    chat = [{"role": "system", "content": system}]
    chat += [{"role": m.role, "content": m.content} for m in kept if m.role != "system"]
    return chat


def whole_reply(reply: str, messages: list[Message]) -> str:
    return reply.strip()


# A full reply, not a span: bounded by the task role's own max_tokens (the longest any step may take, and what the
# start-up check sizes the request timeout for), where an answer takes qa's ANSWER_MAX_TOKENS.
RESPOND = Step("respond", prompt=respond_prompt, parse=whole_reply, offline=offline.respond)


def _line(criterion: Criterion, verdict: Verdict) -> str:
    state = "UNREADABLE" if verdict.met is None else "MET" if verdict.met else "NOT MET"
    avoid = " (to avoid)" if criterion.points < 0 else ""
    text = criterion.text if len(criterion.text) <= TRACE_TEXT_CHARS else criterion.text[:TRACE_TEXT_CHARS] + "..."
    note = f" -- {verdict.note}" if verdict.note else ""
    return f"  {state:<10} {criterion.points:+g}{avoid}: {text}{note}"


def _costly_first(pair: tuple[Criterion, Verdict]) -> int:
    """Criteria that lost points (a positive one not met, a negative one met), then unreadable ones, then the rest."""
    criterion, verdict = pair
    if verdict.met is None:
        return 1
    lost = (criterion.points > 0) != verdict.met
    return 0 if lost else 2


def trace(grader: Grader, criteria: list[Criterion], verdicts: list[Verdict]) -> str:
    score = rubric_score([c.points for c in criteria], [v.met for v in verdicts])
    unreadable = sum(v.met is None for v in verdicts)
    head = [f"graded by {grader.label}"]
    if score.raw is None:
        head.append("no positive criterion could be judged: scored 0 (not a verdict)")
    else:
        head.append(f"score {score.score:.3f}: {score.earned:g} of {score.possible:g} positive points "
                    f"(unclipped {score.raw:.3f})")
    if unreadable:
        head.append(f"{unreadable} verdict(s) unreadable, left out of the score")
    pairs = sorted(zip(criteria, verdicts), key=_costly_first)
    return "\n".join([*head, "criteria, those that cost points first:", *(_line(c, v) for c, v in pairs)])


class RubricGraded:
    name = "rubric"
    steps = (RESPOND.name, "grade", "grade_unreadable")  # grading is the judge's (or the stand-in's), not the agent's
    overlap = Overlap(across_items=True)  # one read per item, at its start
    brief = ("Each item is a conversation ending in a user's request. The agent writes its full reply from "
             "read()'s output, queried with the end of the conversation. The reply is checked against the item's "
             "rubric: criteria worth points when met, negative points for what a reply must avoid; the score is "
             "the points met over the total of the positive points, clipped to [0, 1]. Memory holds past "
             "conversations with their ideal response (or, where none was given, what their rubric asked for). "
             "In a failed case, 'what happened' lists every criterion with its points and verdict.")

    def metric_for(self, judged: bool) -> str:
        return METRIC if judged else f"{METRIC} [{STAND_IN_LABEL}]"

    def run(self, item: Item, run: ItemRun) -> ItemResult:
        spec = RubricSpec.model_validate(item.spec)
        grader = grader_for(run.judge)
        recall = run.memory.recall(item.question)
        result = ItemResult.of(item, query=recall.query, seconds=recall.seconds)
        if recall.error is not None:
            result.error = recall.error
            result.trace = f"graded by {grader.label}\nnot graded: read() failed, so no response was written (score 0)"
            return result
        result.context = recall.context
        result.prediction = run.ask(RESPOND, recall.context, spec.messages)
        verdicts = self._grade(grader, spec, result.prediction, run)
        result.score = rubric_score([c.points for c in spec.criteria], [v.met for v in verdicts]).score
        result.trace = trace(grader, spec.criteria, verdicts)
        return result

    @staticmethod
    def _grade(grader: Grader, spec: RubricSpec, response: str, run: ItemRun) -> list[Verdict]:
        if not response.strip():
            return [Verdict(False, "the response is empty") for _ in spec.criteria]  # nothing to judge; spares calls
        conversation = conversation_text(spec.messages, JUDGE_CONVERSATION_CHARS)
        verdicts = []
        for criterion in spec.criteria:
            verdict = grader(conversation, response, criterion)
            run.calls["grade"] += 1
            run.calls["grade_unreadable"] += verdict.met is None
            verdicts.append(verdict)
        return verdicts
