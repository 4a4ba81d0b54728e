"""Toolkit completions: what the offline agent answers when a memory program asks its LLM toolkit."""

from __future__ import annotations

from mstar_ray import text as tx

_TOOLKIT_MAX_SENTENCES = 5


def _split_request(content: str) -> tuple[str, list[str]]:
    """(request, material lines): question lines are the request, else the first paragraph/line."""
    lines = content.splitlines()
    if any("?" in line for line in lines):
        request = "\n".join(line for line in lines if "?" in line)
        return request, [line for line in lines if "?" not in line]
    if "\n\n" in content.strip():
        head, rest = content.strip().split("\n\n", 1)
        return head, rest.splitlines()
    non_empty = [line for line in lines if line.strip()]
    if len(non_empty) > 1:
        return non_empty[0], non_empty[1:]
    sentences = tx.split_sentences(content)
    return (sentences[0], sentences[1:]) if sentences else ("", [])


def _material_units(lines: list[str]) -> list[str]:
    """Sentences of the material; later sentences of a "[date] Speaker:" line keep that prefix."""
    units: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        turn = tx.parse_turn(line)
        sentences = tx.split_sentences(line)
        prefix = ""
        if turn.header:
            prefix = f"[{turn.header}] " + (f"{turn.speaker}: " if turn.speaker else "")
        for i, sentence in enumerate(sentences):
            units.append(sentence if i == 0 or not prefix else prefix + sentence)
    return units


def toolkit_answer(messages: list[dict[str, str]]) -> str:
    """The material sentences most related to the request, in their original order."""
    users = [m.get("content", "") or "" for m in messages if m.get("role") == "user"]
    content = users[-1] if users else "\n".join(m.get("content", "") or "" for m in messages)
    if not content.strip():
        return ""
    request, material = _split_request(content)
    units = _material_units(material)
    if not units:
        return content.strip()
    req = set(tx.content_stems(request))
    idf = tx.idf_weights(set(tx.content_stems(u)) for u in units)
    scored = []
    for i, unit in enumerate(units):
        matched = sorted(req & set(tx.content_stems(unit)))
        scored.append((sum(idf[t] for t in matched), i))
    related = [r for r in scored if r[0] > 0]
    if related:
        related.sort(key=lambda r: (-r[0], r[1]))
        chosen = sorted(i for _, i in related[:_TOOLKIT_MAX_SENTENCES])
    else:
        # Nothing matches (e.g. "Summarise the following:"): the opening sentences are the fallback.
        chosen = list(range(min(_TOOLKIT_MAX_SENTENCES, len(units))))
    out = "\n".join(units[i] for i in chosen)
    return out[: len(content)]
