"""Toolkit completions: what the offline agent answers when a memory program asks its LLM toolkit.

A request is read the way a model reads a prompt: its instructions (the prose), its fields ("Query: ...",
"Target person: ..."), and its material (the lines under a "Label:" heading such as "Evidence:" or "Texts:",
or, without a heading, everything after the first paragraph). A section headed "Rules:", "Guidelines:" and the
like directs rather than informs: its lines are instructions and fields wherever it stands. What is asked is
decided from the instructions alone, never from who asks:

- answer the question from the material  -> the short answer span (as the offline answerer cuts it), or
                                            "Not found in memory." when no sentence states most of what is asked;
- rewrite or expand a query              -> the query and its key terms;
- pick or rank items                      -> the numbers of the items most related to the query;
- list the facts a text states            -> its fact sentences, speakers and resolved dates kept;
- anything else with a query (summarise / extract what is relevant) -> the material sentences most related
  to the query, each once, in text order, restated with speaker and date (relative dates resolved);
- without a query (summarise this)        -> the text's most informative sentences.

Lengths follow the request ("up to 3 lines", "not more than 5 lines"), else a model's usual few lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mstar_ray import text as tx
from mstar_ray.families.qa.offline import IDK, answer_from_context, rank_sentences, support
from mstar_ray.statements import Statement, informative, is_fact, statements

DEFAULT_LINES = 5
MAX_FACTS = 12
# A sentence scoring below this share of the best one is not "relevant" enough to quote.
RELATED_SHARE = 0.5
# A text answers a question when one of its sentences states at least this share of what the question asks.
ANSWER_SUPPORT = 0.5
_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 _/()\-]{0,40}?)\s*:\s*(.*)$")
_QUESTION_LABELS = frozenset("query question q request search ask user input".split())
# Headings of sections that direct the model rather than give it something to read.
_DIRECTION_HEADINGS = frozenset("rules rule instructions instruction guidelines guideline requirements constraints "
                                "steps policy format task".split())
_COUNT = re.compile(r"\b(?:up to|at most|not more than|no more than|maximum of|max)\s+(\d+|one|two|three|four|five|"
                    r"six|seven|eight|nine|ten)\b|\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten)\s+(?:short\s+)?"
                    r"(?:bullet\s+)?(?:lines|bullets|sentences|facts|items|points|snippets)\b", re.IGNORECASE)
_ITEM_NUMBER = re.compile(r"^\s*(?:\[(\d{1,3})\]|(\d{1,3})[.):])\s*")

_ASKS_REWRITE = re.compile(r"\b(?:rewrite|rephrase|reformulate|expand|paraphrase)\b[^.\n]*\b(?:query|question|search)|"
                           r"\b(?:generate|produce|write|give|list|return)\b[^.\n]*\b(?:search|retrieval) "
                           r"(?:quer(?:y|ies)|terms|keywords)\b", re.IGNORECASE)
_ASKS_PICK = re.compile(r"\b(?:rank|re-?rank|select|pick|choose)\b[^.\n]*\b(?:items?|memories|entries|records|"
                        r"passages|snippets|candidates|documents|numbers|indices|ids)\b", re.IGNORECASE)
_ASKS_ANSWER = re.compile(r"(?:^|[.\n]\s*)answer\b|\b(?:return|give|produce|provide|output|write)\b[^.\n]*\banswer\b",
                          re.IGNORECASE)
_ASKS_FACTS = re.compile(r"\b(?:list|extract|enumerate)\b[^.\n]*\bfacts?\b", re.IGNORECASE)
_TRAILING_INSTRUCTION = re.compile(r"^\s*(?:return|produce|provide|give|output|answer|respond|write|list|summari[sz]e|"
                                   r"keep|use|only|now|please)\b", re.IGNORECASE)


def asks_answer(instructions: str) -> bool:
    """Whether a prompt's instructions ask the model to answer (not to quote, list or rewrite): the one reading
    of it that the offline toolkit and the offline reflector's ``quote_evidence`` share."""
    return bool(_ASKS_ANSWER.search(instructions))


@dataclass
class Request:
    instructions: list[str] = field(default_factory=list)
    fields: dict[str, str] = field(default_factory=dict)
    material: list[str] = field(default_factory=list)

    @property
    def question(self) -> str:
        for label, value in self.fields.items():
            if set(label.lower().replace("_", " ").split()) & _QUESTION_LABELS:
                return value
        asked = [line for line in self.instructions if "?" in line]
        return " ".join(asked)

    @property
    def hints(self) -> str:
        """The other fields' values ("Target person: Caroline"): what the program says the query is about."""
        q = self.question
        return " ".join(v for v in self.fields.values() if v != q and v.lower() not in ("n/a", "unspecified", "none"))


def parse_request(content: str) -> Request:
    """Sections as a model reads them: a heading line ("Evidence:", "Rules:") opens one; a section of directions
    (rules, guidelines, the task) holds instructions and fields, any other section is material."""
    lines = content.splitlines()
    headings = [i for i, line in enumerate(lines) if (m := _FIELD.match(line)) and not m.group(2).strip()
                and len(m.group(1).split()) <= 4]
    if not headings:
        return _without_heading(content)
    request = Request()
    _read_directions(lines[:headings[0]], request)
    body: list[str] = []
    for start, end in zip(headings, [*headings[1:], len(lines)]):
        label = _FIELD.match(lines[start]).group(1).lower().replace("_", " ")  # type: ignore[union-attr]
        if set(label.split()) & _DIRECTION_HEADINGS:
            _read_directions(lines[start + 1:end], request)
        else:
            body += lines[start + 1:end]
    # A closing instruction after the material ("Return up to 3 short bullet lines.") is not material.
    while body and (not body[-1].strip() or (_TRAILING_INSTRUCTION.match(body[-1]) and not _FIELD.match(body[-1]))):
        if body[-1].strip():
            request.instructions.append(body[-1].strip())
        body.pop()
    # A question field written after the material ("Texts: ... Question: ...") is still the question.
    for i in range(len(body) - 1, -1, -1):
        m = _FIELD.match(body[i])
        if m and m.group(2).strip() and set(m.group(1).lower().split()) & _QUESTION_LABELS and i and not body[i - 1].strip():
            request.fields[m.group(1).strip()] = m.group(2).strip()
            del body[i]
            break
    request.material = [line for line in body if line.strip()]
    return request


def _read_directions(lines: list[str], request: Request) -> None:
    for line in lines:
        m = _FIELD.match(line)
        if m and m.group(2).strip() and len(m.group(1).split()) <= 4:
            request.fields[m.group(1).strip()] = m.group(2).strip()
        elif line.strip():
            request.instructions.append(line.strip())


def _without_heading(content: str) -> Request:
    """Question lines are the request, else the first paragraph or line; the rest is material."""
    lines = content.splitlines()
    if any("?" in line for line in lines):
        return Request(instructions=[line for line in lines if "?" in line],
                       material=[line for line in lines if "?" not in line and line.strip()])
    if "\n\n" in content.strip():
        head, rest = content.strip().split("\n\n", 1)
        return Request(instructions=[head], material=[line for line in rest.splitlines() if line.strip()])
    non_empty = [line for line in lines if line.strip()]
    if len(non_empty) > 1:
        return Request(instructions=non_empty[:1], material=non_empty[1:])
    sentences = tx.split_sentences(content)
    return Request(instructions=sentences[:1], material=sentences[1:])


def _wanted_lines(instructions: str) -> int:
    m = _COUNT.search(instructions)
    if not m:
        return DEFAULT_LINES
    word = (m.group(1) or m.group(2)).lower()
    return max(1, int(tx.NUMBER_WORDS.get(word, word)))


def _material_text(material: list[str]) -> str:
    """The material with " | "-joined lists split into lines, so each listed fact is a sentence of its own."""
    return "\n".join(part for line in material for part in line.split(" | "))


def _lines(items: list[str], instructions: str) -> str:
    bullet = "- " if re.search(r"\bbullet", instructions, re.IGNORECASE) else ""
    return "\n".join(f"{bullet}{item}" for item in items)


def toolkit_answer(messages: list[dict[str, str]]) -> str:
    users = [m.get("content", "") or "" for m in messages if m.get("role") == "user"]
    content = users[-1] if users else "\n".join(m.get("content", "") or "" for m in messages)
    if not content.strip():
        return ""
    system = " ".join(m.get("content", "") or "" for m in messages if m.get("role") == "system")
    request = parse_request(content)
    instructions = " ".join([system, *request.instructions]).strip()
    question = request.question
    material = _material_text(request.material)
    if not material.strip():
        return content.strip()
    wanted = _wanted_lines(instructions)
    focus = " ".join(part for part in (question, request.hints) if part)

    if question and _ASKS_REWRITE.search(instructions):
        terms = tx.keywords(f"{question} {request.hints}", limit=12)
        return f"{question}\n" + ", ".join(terms)
    if focus and _ASKS_PICK.search(instructions):
        return _pick(request.material, focus, wanted)
    if question and asks_answer(instructions):
        # Asked to answer from given text, a model answers what the text states and says so when it does not;
        # the words after the question's "?" are the program's hints ("... support group? Caroline date").
        asked = question[: question.index("?") + 1] if "?" in question else question
        answer = answer_from_context(material, question) if support(material, asked) >= ANSWER_SUPPORT else IDK
        return "Not found in memory." if answer == IDK else answer
    found = statements(material)
    if not focus or _ASKS_FACTS.search(instructions) and not question:
        chosen = [s for s in found if is_fact(s)][:MAX_FACTS] if _ASKS_FACTS.search(instructions) else \
            informative(found, wanted)
        return _lines([s.render() for s in chosen], instructions)
    ranked = rank_sentences(material, focus)
    if not ranked:
        return "No relevant information found."
    by_order = {s.order: s for s in found}
    top = ranked[0][0]
    related = [by_order[unit.order] for score, unit in ranked if score >= top * RELATED_SHARE]
    # In text order, each with its date: what was said when, as a model quoting the evidence keeps it.
    kept = sorted(_distinct(related, wanted), key=lambda s: s.order)
    return _lines([s.render(with_date=True) for s in kept], instructions)


def _distinct(ranked: list[Statement], wanted: int) -> list[Statement]:
    """The first ``wanted`` of ``ranked`` that say something new: material often repeats a sentence (as a summary,
    a fact and the raw text of one record), and a model quoting it does not quote a sentence twice, nor a piece of
    one it already quoted."""
    # Words padded with spaces, so that containment is of whole words. Not by speaker: a record's labels
    # ("Facts:", "Spans:") read as speakers and would keep its repeats apart.
    kept: list[tuple[str, Statement]] = []
    for s in ranked:
        words = f" {' '.join(tx.tokenize(s.resolved))} "
        if any(words in seen for seen, _ in kept):
            continue
        # A longer sentence holding one already kept says all of it and more: it takes that one's place.
        kept = [(seen, k) for seen, k in kept if seen not in words] + [(words, s)]
        if len(kept) == wanted:
            break
    return [s for _, s in kept]


def _pick(material: list[str], focus: str, wanted: int) -> str:
    """The numbers of the numbered items most related to the focus ("3, 1"), best first; the items themselves
    when they are not numbered."""
    numbered = [(m.group(1) or m.group(2), line[m.end():]) for line in material if (m := _ITEM_NUMBER.match(line))]
    items = numbered or [(str(i + 1), line) for i, line in enumerate(material)]
    q = set(tx.content_stems(focus))
    idf = tx.idf_weights(set(tx.content_stems(text)) for _, text in items)
    scored = sorted(((sum(idf[t] for t in sorted(q & set(tx.content_stems(text)))), i) for i, (_, text) in
                     enumerate(items)), key=lambda r: (-r[0], r[1]))
    chosen = [items[i] for score, i in scored[:wanted] if score > 0] or items[:1]
    if numbered:
        return ", ".join(number for number, _ in chosen)
    return "\n".join(text for _, text in chosen)
