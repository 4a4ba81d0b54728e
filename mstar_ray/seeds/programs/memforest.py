"""Seed: MemForest (2026). Memories are organised as a forest: each tree is an event unit, and forgetting
merges nodes instead of deleting the oldest. A new memory joins an event by global semantic similarity (any
event whose centroid it resembles strongly) or by local temporal continuity (the event in progress, when it
shares the time anchor and resembles it at least weakly); otherwise it opens a new event. Inside an event
each node hangs under the node it is most similar to, which grows a maximum spanning tree one node at a
time. When an event outgrows EVENT_NODES, its most similar parent-child pair is merged into one node (both
nodes' lines kept; the one LLM call of that write may condense them, and the condensed note is used only if
it keeps every number, date and name of the two), so the event shrinks by structure, not by age.

A read scores nodes against the question (IDF-weighted cosine), takes the best as anchors and propagates
from them along tree edges and temporal neighbours (the node before and after in time), so the context
carries each hit's event around it. Nodes are shown grouped by event, in time order; a merged node too long
to show whole shows its lines closest to the question.

Left out, and why: MemForest builds its spanning trees over embeddings and compresses whole histories at
a target ratio; here similarity is lexical (computed inside the program, no embedding calls per write)
and merging is triggered per event by size, one merge per write, within the one-call budget.
"""

import math
import re
from collections import Counter
from dataclasses import dataclass, field

COMMIT_MESSAGE = "Seed (MemForest): event trees by similarity + time continuity; merge, not delete; reads propagate."

INSTRUCTION_KNOWLEDGE_ITEM = "Note the time anchor of the text as written and, in a few words, the event it belongs to."
INSTRUCTION_QUERY = "Restate the question with the names, events and times it involves."
INSTRUCTION_RESPONSE = (
    "Answer from the events; each lists its memories in time order with their dates. Give the shortest "
    "correct answer."
)
ALWAYS_ON_KNOWLEDGE = ""

MAX_CONTEXT_CHARS = 3000
EVENT_NODES = 10
JOIN_ANY_EVENT = 0.45
JOIN_CURRENT_EVENT = 0.08
RECENT_EVENTS = 50
MERGE_PROMPT_CHARS = 12000  # longer merged nodes keep their lines: the toolkit caps a prompt's size
ANCHORS = 4
PROPAGATION = 0.6
SHOWN_NODES = 10
NODE_CHARS = 700
HEADER = re.compile(r"^\[([^\]]{1,80})\]")
STOP = frozenset(
    "a an and are as at be but by did do does for from had has have he her him his how i in is it its me my "
    "of on or our she so that the their them they this to was we were what when where which who whom why "
    "will with would you your".split()
)


@dataclass
class KnowledgeItem:
    time_anchor: str = field(metadata={"description": "when it happened or was said, as written"})
    event: str = field(metadata={"description": "the event the text belongs to, in a few words"})


@dataclass
class Query:
    question: str = field(metadata={"description": "the question with the names, events and times it involves"})


def terms(text):
    return Counter(w for w in re.findall(r"[a-z0-9]+", (text or "").lower()) if w not in STOP and len(w) > 1)


def anchors_in(text):
    return set(re.findall(r"\b\d{1,4}\b|\b[A-Z][a-z]{2,}\b", text))


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.nodes = []  # dicts: text, terms, event, parent, order, anchor, alive
        self.events = []  # dicts: centroid (Counter), nodes (list of node ids), anchor
        self.df = Counter()

    # -- similarity ------------------------------------------------------------------------------

    def _weight(self, word):
        return math.log(1 + (len(self.nodes) + 1) / (1 + self.df[word]))

    def _cosine(self, a, b):
        if not a or not b:
            return 0.0
        dot = sum(a[w] * b[w] * self._weight(w) ** 2 for w in a if w in b)
        norm_a = math.sqrt(sum((c * self._weight(w)) ** 2 for w, c in a.items()))
        norm_b = math.sqrt(sum((c * self._weight(w)) ** 2 for w, c in b.items()))
        return dot / (norm_a * norm_b) if norm_a and norm_b else 0.0

    # -- write -----------------------------------------------------------------------------------

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        text = raw_text.strip()
        if not text:
            return
        header = HEADER.match(text)
        anchor = (item.time_anchor or (header.group(1) if header else "")).strip()
        words = terms(f"{text} {item.event or ''}")
        node_id = len(self.nodes)
        self.df.update(set(words))
        event_id = self._choose_event(words, anchor)
        node = {"lines": [text], "terms": words, "event": event_id, "parent": None, "order": node_id,
                "anchor": anchor, "alive": True}
        self.nodes.append(node)
        event = self.events[event_id]
        members = [i for i in event["nodes"] if self.nodes[i]["alive"]]
        if members:
            node["parent"] = max(members, key=lambda i: (self._cosine(words, self.nodes[i]["terms"]), i))
        event["nodes"].append(node_id)
        event["centroid"].update(words)
        event["anchor"] = anchor
        if len(members) + 1 > EVENT_NODES:
            self._merge_closest(event)

    def _choose_event(self, words, anchor):
        if self.events:
            current = len(self.events) - 1
            recent = range(max(0, len(self.events) - RECENT_EVENTS), len(self.events))
            best = max(recent, key=lambda e: (self._cosine(words, self.events[e]["centroid"]), e))
            if self._cosine(words, self.events[best]["centroid"]) >= JOIN_ANY_EVENT:
                return best
            continuing = self.events[current]["anchor"] == anchor
            if continuing and self._cosine(words, self.events[current]["centroid"]) >= JOIN_CURRENT_EVENT:
                return current
        self.events.append({"centroid": Counter(), "nodes": [], "anchor": anchor})
        return len(self.events) - 1

    def _merge_closest(self, event):
        """Merge the most similar parent-child pair of the event; the child's children move to the parent."""
        pairs = [
            (self._cosine(self.nodes[i]["terms"], self.nodes[self.nodes[i]["parent"]]["terms"]), i)
            for i in event["nodes"]
            if self.nodes[i]["alive"] and self.nodes[i]["parent"] is not None
        ]
        if not pairs:
            return
        _, child_id = max(pairs)
        child = self.nodes[child_id]
        parent = self.nodes[child["parent"]]
        parent["lines"] = self._condense(parent["lines"], child["lines"])
        parent["terms"] = parent["terms"] + child["terms"]
        parent["order"] = min(parent["order"], child["order"])
        child["alive"] = False
        for other in event["nodes"]:
            if self.nodes[other]["alive"] and self.nodes[other]["parent"] == child_id:
                self.nodes[other]["parent"] = child["parent"]

    def _condense(self, first, second):
        """The lines of a merged node: both nodes' lines, or one condensed line if the model wrote one that
        keeps every number, date and name of the two."""
        joined = first + second
        text = "\n".join(joined)
        if len(text) > MERGE_PROMPT_CHARS:
            return joined
        prompt = f"{text}\nCan you merge these memories into one short note, keeping every name, date and number?"
        try:
            merged = str(self.toolkit.llm_completion([{"role": "user", "content": prompt}])).strip()
        except Exception as exc:
            self.toolkit.logger.debug(f"merge call failed ({exc}); keeping both texts")
            return joined
        if merged and len(merged) < len(text) and anchors_in(text) <= anchors_in(merged):
            return [merged]
        return joined

    # -- read ------------------------------------------------------------------------------------

    def read(self, query: Query) -> str:
        wanted = terms(query.question)
        alive = [i for i, n in enumerate(self.nodes) if n["alive"]]
        if not alive or not wanted:
            return ""
        score = {i: self._cosine(wanted, self.nodes[i]["terms"]) for i in alive}
        anchors = sorted((i for i in alive if score[i] > 0), key=lambda i: (-score[i], -i))[:ANCHORS]
        reached = dict((i, score[i]) for i in anchors)
        by_time = sorted(alive, key=lambda i: self.nodes[i]["order"])
        position = {node: p for p, node in enumerate(by_time)}
        for anchor in anchors:
            neighbours = [self.nodes[anchor]["parent"]]
            neighbours += [i for i in alive if self.nodes[i]["parent"] == anchor]
            p = position[anchor]
            neighbours += by_time[max(0, p - 1):p] + by_time[p + 1:p + 2]
            for other in neighbours:
                if other is not None and self.nodes[other]["alive"]:
                    reached[other] = max(reached.get(other, 0.0), PROPAGATION * score[anchor])
        chosen = sorted(reached, key=lambda i: -reached[i])[:SHOWN_NODES]
        by_event = {}
        for i in sorted(chosen, key=lambda i: self.nodes[i]["order"]):
            by_event.setdefault(self.nodes[i]["event"], []).append(self._node_text(self.nodes[i], wanted))
        parts = [f"Event {event + 1}:\n" + "\n".join(texts) for event, texts in by_event.items()]
        return "\n\n".join(parts)[:MAX_CONTEXT_CHARS]

    def _node_text(self, node, wanted):
        """A node's lines; a merged node too long to show whole keeps its lines closest to the question."""
        lines = node["lines"]
        if sum(len(line) + 1 for line in lines) <= NODE_CHARS:
            return "\n".join(lines)
        ranked = sorted(range(len(lines)), key=lambda k: (-self._cosine(wanted, terms(lines[k])), k))
        kept, size = [], 0
        for k in ranked:
            if size + len(lines[k]) > NODE_CHARS:
                continue
            kept.append(k)
            size += len(lines[k]) + 1
        return "\n".join(lines[k] for k in sorted(kept)) or lines[ranked[0]][:NODE_CHARS]
