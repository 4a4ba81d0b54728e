"""HOSTILE: floods the host with toolkit requests inside one read(), each costing the host a round trip
(and the run's cache a look-up) while holding little or nothing: "empty|N" sends N embed requests of no
text, "tiny|N" N requests of one short text each, "queries|N" N ChromaDB queries (one embed request each).
Every error is swallowed; read() answers "answered N"."""

from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.collection = None

    def write(self, item, raw_text):
        pass

    def read(self, query):
        how, count = query.text.split("|")
        if how == "queries":
            self.collection = self.toolkit.chroma.get_or_create_collection("flood")
            self.collection.add(ids=["a"], documents=["a document"])
        answered = 0
        for i in range(int(count)):
            try:
                if how == "empty":
                    self.toolkit._ask({"op": "embed", "texts": []})
                elif how == "tiny":
                    self.toolkit._ask({"op": "embed", "texts": ["t%d" % i]})
                else:
                    self.collection.query(query_texts=["question %d" % i], n_results=1)
                answered += 1
            except Exception:
                pass
        return "answered %d" % answered
