"""Seed: RuleMem (2026). Two memories: facts (each text, with the fact the task agent extracted and its
entities) and rules, natural-language Horn clauses "IF premise AND premise THEN conclusion" induced from the
facts. A question first activates the rules whose conclusion it asks about, then looks for facts that
satisfy their premises, so evidence that shares no words with the question (the premises of a multi-hop
answer) is retrieved because a rule says it is needed. Facts that match the question directly come too.

Induction: every RULE_EVERY writes, one write spends its LLM call asking for rules over the facts written
since the last induction; lines of the form "IF ... THEN ..." are kept, each with the facts it came from
as its support. When the reply holds no such line (a failed call, an unusable model, the offline backend),
association rules stand in: for entities that occur together in at least MIN_SUPPORT facts and more often
than chance (lift), "IF <a> THEN <b>", so that a question about b also looks for facts about a.

Left out, and why: RuleMem extracts rules from reasoning paths and filters them with RPC, a check that
needs the model's perplexities (internals the toolkit's text-only LLM call does not expose); here a rule is
kept if it parses and its premises match at least one stored fact. Rules are not revised against counter-
examples.
"""

import re
from collections import Counter
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed (RuleMem): facts plus induced IF-THEN rules; questions activate rules, then premise facts."

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Extract from the text the fact it states (one sentence with who, what and when) and the entities "
    "involved (people, places, things, activities)."
)
INSTRUCTION_QUERY = "Restate the question and list the entities it involves."
INSTRUCTION_RESPONSE = (
    "Answer from the facts. Rules say which facts bear on the question: check that a rule's premises hold "
    "in the facts before using its conclusion. Give the shortest correct answer."
)
ALWAYS_ON_KNOWLEDGE = ""

MAX_CONTEXT_CHARS = 3000
RULE_EVERY = 25
RULE_SOURCE_FACTS = 25
FACT_CHARS = 400  # a fact's share of the induction prompt (a whole session as a fact would crowd out the rest)
MAX_RULES_PER_INDUCTION = 5
MIN_SUPPORT = 3
MIN_LIFT = 3.0
# An entity in more than this share of the facts (a speaker of the chat) concludes no association rule.
MAX_CONCLUSION_SHARE = 0.1
ACTIVE_RULES = 3
FACTS_PER_PREMISE = 2
DIRECT_FACTS = 6
STOP = frozenset(
    "a an and are as at be but by did do does for from had has have he her him his how i if in is it its me my "
    "of on or our she so that the their them then they this to was we were what when where which who whom why "
    "will with would you your".split()
)


@dataclass
class KnowledgeItem:
    fact: str = field(metadata={"description": "the fact the text states, in one sentence"})
    entities: list[str] = field(metadata={"description": "the entities involved: people, places, things, activities"})


@dataclass
class Query:
    question: str = field(metadata={"description": "the question, restated"})
    entities: list[str] = field(metadata={"description": "the entities the question involves"})


def terms(text):
    return {w for w in re.findall(r"[a-z0-9]+", (text or "").lower()) if w not in STOP and len(w) > 2}


def parse_rules(reply):
    """(premises, conclusion) for each "IF a AND b THEN c" line of a reply."""
    rules = []
    for line in reply.splitlines():
        match = re.search(r"\bIF\b(.+?)\bTHEN\b(.+)", line, re.I)
        if not match:
            continue
        premises = [p.strip(" .,;:") for p in re.split(r"\band\b|,", match.group(1), flags=re.I)]
        premises = [p for p in premises if terms(p)]
        conclusion = match.group(2).strip(" .,;:")
        if premises and terms(conclusion):
            rules.append((premises, conclusion))
    return rules


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.facts = []  # (text, fact, entity terms)
        self.rules = []  # (premises, conclusion, support)
        self.since_induction = 0

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        text = raw_text.strip()
        if not text:
            return
        entity_terms = set()
        for entity in item.entities or []:
            entity_terms |= terms(str(entity))
        self.facts.append((text, (item.fact or "").strip(), entity_terms))
        self.since_induction += 1
        if self.since_induction >= RULE_EVERY:
            self.since_induction = 0
            self._induce()

    # -- rules -----------------------------------------------------------------------------------

    def _induce(self):
        recent = self.facts[-RULE_SOURCE_FACTS:]
        listing = "\n".join(f"- {(fact or text)[:FACT_CHARS]}" for text, fact, _ in recent)
        prompt = (
            f"{listing}\n"
            f"Which general rules do these facts support? Write at most {MAX_RULES_PER_INDUCTION} lines, each "
            "'IF <premise> AND <premise> THEN <conclusion>'?"
        )
        try:
            reply = str(self.toolkit.llm_completion([{"role": "user", "content": prompt}]))
        except Exception as exc:
            self.toolkit.logger.debug(f"rule induction call failed ({exc}); association rules instead")
            reply = ""
        added = 0
        for premises, conclusion in parse_rules(reply)[:MAX_RULES_PER_INDUCTION]:
            support = [i for i, (text, _, _) in enumerate(self.facts) if any(terms(p) <= terms(text) for p in premises)]
            if support:
                self.rules.append((premises, conclusion, len(support)))
                added += 1
        if not added:
            self._associate()

    def _associate(self):
        """Association rules over entity co-occurrence: IF a THEN b when a and b occur together in at least
        MIN_SUPPORT facts and a raises b's frequency at least MIN_LIFT-fold; an entity found in most facts (a
        speaker of the chat) concludes nothing."""
        single, pairs = Counter(), Counter()
        for _, _, entities in self.facts:
            ordered = sorted(entities)
            single.update(ordered)
            pairs.update((a, b) for i, a in enumerate(ordered) for b in ordered[i + 1:])
        total = len(self.facts)
        known = {(tuple(p), c) for p, c, _ in self.rules}
        for (a, b), together in pairs.most_common():
            if together < MIN_SUPPORT:
                break
            for premise, conclusion in ((a, b), (b, a)):
                lift = together * total / (single[premise] * single[conclusion])
                common = single[conclusion] > MAX_CONCLUSION_SHARE * total
                if lift >= MIN_LIFT and not common and ((premise,), conclusion) not in known:
                    self.rules.append(([premise], conclusion, together))
                    known.add(((premise,), conclusion))

    # -- read ------------------------------------------------------------------------------------

    def read(self, query: Query) -> str:
        if not self.facts:
            return ""
        wanted = terms(query.question)
        for entity in query.entities or []:
            wanted |= terms(str(entity))
        if not wanted:
            return ""
        rules = sorted(
            ((len(terms(c) & wanted), support, premises, c) for premises, c, support in self.rules if terms(c) & wanted),
            key=lambda r: (-r[0], -r[1]),
        )[:ACTIVE_RULES]
        lines, used = [], set()
        for _, _, premises, conclusion in rules:
            lines.append(f"Rule: IF {' AND '.join(premises)} THEN {conclusion}")
            for premise in premises:
                used.update(self._best_facts(terms(premise) | (wanted - terms(conclusion)), FACTS_PER_PREMISE, used))
        used.update(self._best_facts(wanted, DIRECT_FACTS, used))
        # Facts in the order they were written: the rules above say which are premises.
        lines += ["Facts:"] + [self.facts[i][0] for i in sorted(used)]
        return "\n".join(lines)[:MAX_CONTEXT_CHARS]

    def _best_facts(self, wanted, limit, skip):
        scored = []
        for index, (text, fact, entities) in enumerate(self.facts):
            if index in skip:
                continue
            overlap = len(wanted & (terms(text) | entities))
            if overlap:
                scored.append((overlap, index))
        # Most overlap first; on ties the later fact, which holds the current state of anything that changed.
        return [index for _, index in sorted(scored, reverse=True)[:limit]]
