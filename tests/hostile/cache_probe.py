"""HOSTILE: a channel between candidates through the run's embedding cache. "plant|WORD" embeds marker
texts built from WORD (an earlier candidate leaving a message); "probe|WORD|GUESS" embeds the same markers,
a text the host may have embedded (GUESS: a static question, say) and as many fresh texts, timing each
group: a cache hit is answered faster than a miss, so marker/fresh far below 1 says the markers (or the
guess) were there. A "*" in WORD becomes the marker's number, so every marker can bring words of its own (what
the model's memo of words would remember). "fill|N" embeds N long distinct texts, to grow the run's cache. read() answers the
probe's ratios "marker M guess G"."""

import dataclasses
from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""
ROLE = "planter"  # the probing candidate differs from the planting one in this constant only
MARKERS = 64


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.embed = toolkit.chroma._host_embed  # what its collections embed with: the host
        self.clock = dataclasses.sys.modules["time"].perf_counter

    def write(self, item, raw_text):
        pass

    def timed(self, texts):
        took = 0.0
        for text in texts:
            started = self.clock()
            self.embed([text])
            took += self.clock() - started
        return took / max(1, len(texts))

    def read(self, query):
        parts = query.text.split("|")
        markers = ["marker %s number %d" % (parts[1].replace("*", str(i)), i) for i in range(MARKERS)] if len(parts) > 1 else []
        if parts[0] == "plant":
            self.embed(markers)
            return "planted"
        if parts[0] == "fill":
            count = int(parts[1])
            for start in range(0, count, 128):
                self.embed(["filler %d %s" % (i, "x" * 900) for i in range(start, min(count, start + 128))])
            return "filled"
        fresh = ["fresh %s %d %f" % (ROLE, i, self.clock()) for i in range(MARKERS)]
        marker_s, guess_s, fresh_s = self.timed(markers), self.timed([parts[2]]), self.timed(fresh)
        return "marker %.2f guess %.2f" % (marker_s / fresh_s, guess_s / fresh_s)
