"""Kinds of statement a schema field may ask for ("causal_links", "activities_planned", "emotional_outcomes"),
each recognised by the words that mark it in any text: a model asked for "the causal links" lists the sentences
that say why; asked for "planned activities", those that say what someone will do."""

from __future__ import annotations

import re

from mstar_ray.agent.offline.fields import name_tokens
from mstar_ray.program_schema import FieldSpec

_MARKERS: tuple[tuple[frozenset[str], re.Pattern[str]], ...] = tuple(
    (frozenset(cues.split()), re.compile(pattern, re.IGNORECASE)) for cues, pattern in (
        ("causal cause causes because reason reasons motivation motive why effect",
         r"\b(?:because|since|so that|due to|thanks to|motivat\w*|inspir\w*|made me|led (?:me|to)|reason|that's why)\b"),
        ("planned plan plans future intention intentions goal goals upcoming",
         r"\b(?:going to|gonna|plan\w*|will|want to|hoping to|hope to|thinking (?:of|about)|next|soon|someday)\b"),
        ("emotion emotions emotional feeling feelings mood sentiment outcome outcomes",
         r"\b(?:feel\w*|felt|happy|sad|excited|grateful|thankful|proud|scared|anxious|relieved|glad|love[ds]?|"
         r"upset|nervous|stressed|calm|joy\w*|inspired|overwhelmed|lonely|amazing|awesome)\b"),
        ("quantitative quantity quantities number numbers numeric count counts amount amounts",
         r"\b(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|dozen|hundred|thousand|first|second|third)\b"),
        ("relationship relationships relation relations family social",
         r"\b(?:mom|mother|dad|father|parents?|kids?|children|son|daughter|husband|wife|partner|friends?|"
         r"brother|sister|grand\w+|family|boyfriend|girlfriend|mentor|colleague|neighbou?r)\b"),
        ("change changes life transition transitions milestone milestones",
         r"\b(?:moved|started|began|new|changed|became|quit|lost|graduated|married|adopted|transition\w*|"
         r"finally|first time)\b"),
        ("activity activities event events done participated participation hobby hobbies experience experiences",
         r"\b(?:I|we|my \w+)\s+(?:\w+ly\s+)?(?:went|did|made|took|ran|got|saw|had|bought|won|began|started|joined|"
         r"attended|visited|tried|played|painted|read|wrote|finished|signed|volunteered|\w+ed)\b"),
    )
)


def statement_marker(spec: FieldSpec, *, name_only: bool = False) -> re.Pattern[str] | None:
    """The marker of the kind of statement the field asks for, from its name, else its description."""
    for source in (spec.name,) if name_only else (spec.name, spec.description):
        tokens = set(name_tokens(source))
        for cues, marker in _MARKERS:
            if tokens & cues:
                return marker
    return None
