"""HOSTILE: writes to the terminal of whoever reads the results: every message it controls carries ESC,
CSI and OSC sequences (retitle the window, erase the line, a fake "final program" line, an OSC 52
clipboard write), C1 controls, a carriage return and a bidirectional override. write() raises a plain
error (reported as a write error), the toolkit's log gets the same text, and read() raises a RecursionError
(a violation, printed with its traceback)."""

from dataclasses import dataclass

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = ALWAYS_ON_KNOWLEDGE = ""

ESC = chr(27)
BEL = chr(7)
PAYLOAD = (ESC + "]0;pwned" + BEL + ESC + "[2K" + chr(13) + "final program 0123456789abcdef 1.000" + ESC + "[1A"
           + ESC + "]52;c;cG93bmVk" + BEL + chr(0x9B) + "31m" + chr(0x202E) + "desrever" + chr(8) * 8 + chr(0))


@dataclass
class KnowledgeItem:
    text: str


@dataclass
class Query:
    text: str


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.writes = 0

    def write(self, item, raw_text):
        self.writes += 1
        self.toolkit.logger.debug(PAYLOAD)
        if self.writes == 1:
            raise ValueError(PAYLOAD)

    def read(self, query):
        raise RecursionError(PAYLOAD)
