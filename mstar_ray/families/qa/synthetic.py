"""A synthetic long-conversation task, generated deterministically from a seed.

Personas chat over many dated sessions, LoCoMo-style. Some facts never change (favourite food, a cousin or
best friend, home town), others change over time (city, job, hobby, language being learned, car), and one-off
events happen (pets adopted, concerts, races, trips, books finished). Each fact is stated in exactly one turn,
surrounded by small talk, so answering needs retrieval rather than a lucky skim. Each session is one raw
text (or, as an option, each turn), and question evidence names turns. Every value is drawn without
replacement from its pool, which keeps each question unambiguous and makes every answer a literal substring of
an evidence turn.

Only a private ``random.Random(seed)`` is used, so the same arguments always give the same task.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING

from mstar_ray.exit_codes import InputError
from mstar_ray.families.qa.dialogue import Granularity, dialogue_texts, granularity_suffix
from mstar_ray.tasks.model import Item, RawText, Task, limit_items

if TYPE_CHECKING:
    from mstar_ray.families.task_options import SyntheticOptions

CATEGORIES: tuple[str, ...] = ("single-hop", "temporal", "knowledge-update", "multi-hop")
MAX_PERSONAS = 6
MIN_SESSIONS_PER_PERSONA = 3

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip

# Pools. No value may occur as a whole word inside another value of any pool (tests check this), so a value
# found in a turn identifies one fact. Sizes cover MAX_PERSONAS drawing without replacement.
FIRST_NAMES = (
    "Alice", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas", "Keiko", "Leon",
    "Mirela", "Nikolai", "Olivia", "Pavel", "Quinn", "Rosa", "Samir", "Tessa", "Umar", "Vera", "Wes", "Xenia",
    "Yusuf", "Zoe", "Amara", "Callum", "Dalia", "Emil", "Freya", "Gideon", "Hana", "Ivo",
)  # fmt: skip
CITIES = (
    "Lisbon", "Porto", "Valencia", "Lyon", "Ghent", "Utrecht", "Bergen", "Gothenburg", "Krakow", "Ljubljana",
    "Trieste", "Bologna", "Seville", "Bilbao", "Aarhus", "Tallinn", "Riga", "Vilnius", "Salzburg", "Graz",
    "Basel", "Dresden", "Leipzig", "Edinburgh", "Galway", "Cork", "Bristol", "Montreal", "Halifax", "Wellington",
    "Hobart", "Kyoto",
)  # fmt: skip
JOBS = (
    "nurse", "architect", "pharmacist", "carpenter", "librarian", "paramedic", "graphic designer",
    "data analyst", "translator", "electrician", "veterinarian", "pastry chef", "physiotherapist", "journalist",
    "civil engineer", "photographer", "lawyer", "dentist", "pilot", "accountant", "florist", "teacher",
)  # fmt: skip
HOBBIES = (
    "pottery", "rock climbing", "birdwatching", "chess", "salsa dancing", "gardening", "knitting", "surfing",
    "calligraphy", "kayaking", "woodworking", "archery", "fencing", "beekeeping", "sailing", "orienteering",
    "origami", "bouldering",
)  # fmt: skip
LANGUAGES = (
    "Japanese", "Portuguese", "Italian", "Korean", "Dutch", "Greek", "Swedish", "Polish", "Turkish", "Arabic",
    "Mandarin", "Finnish", "Hungarian", "Welsh",
)  # fmt: skip
CARS = (
    "Volvo", "Subaru", "Skoda", "Mazda", "Toyota", "Fiat", "Kia", "Peugeot", "Renault", "Honda", "Nissan",
    "Citroen", "Lancia", "Dacia",
)  # fmt: skip
FOODS = (
    "lasagna", "pad thai", "ramen", "paella", "pierogi", "tacos", "shakshuka", "risotto", "dumplings",
    "moussaka", "enchiladas", "biryani", "goulash", "falafel", "gnocchi", "ceviche",
)  # fmt: skip
PET_SPECIES = ("dog", "cat", "rabbit", "parrot", "tortoise", "hamster", "ferret", "guinea pig", "budgie")
PET_NAMES = (
    "Biscuit", "Pepper", "Mochi", "Waffles", "Juniper", "Ziggy", "Pickles", "Noodle", "Clementine", "Bramble",
    "Sprout", "Tofu", "Marble", "Pretzel", "Nutmeg", "Pixel", "Maple", "Truffle", "Domino", "Fennel", "Rocket",
)  # fmt: skip
# Band and book names are invented for this generator.
BANDS = (
    "The Velvet Lanterns", "Northern Static", "Paper Kites Club", "The Midnight Orchard", "Glass Harbour",
    "Copper Tides", "The Lonely Satellites", "Wild Parade", "Silver Foxglove", "The Hollow Pines",
)  # fmt: skip
BOOKS = (
    "The Salt Road", "A Winter on Tide Street", "Letters from the Lighthouse", "Under the Copper Sky",
    "The Last Ferry Home", "Small Fires", "The Cartographer's Garden", "Seven Quiet Rooms",
    "What the River Kept", "A House of Paper Birds",
)  # fmt: skip
COUNTRIES = (
    "Japan", "Peru", "Iceland", "Morocco", "Vietnam", "Chile", "Greece", "Kenya", "Mexico", "Jordan", "Nepal",
    "Argentina",
)  # fmt: skip
RACES = ("half marathon", "10K", "triathlon", "charity fun run", "sprint duathlon", "mountain relay")

# Attributes whose value changes during the conversation, with their pools.
UPDATABLE: dict[str, tuple[str, ...]] = {
    "city": CITIES, "job": JOBS, "hobby": HOBBIES, "language": LANGUAGES, "car": CARS,
}  # fmt: skip
EVENT_POOLS: dict[str, tuple[str, ...]] = {"concert": BANDS, "race": RACES, "trip": COUNTRIES, "book": BOOKS}

# ---------------------------------------------------------------------------------------------------------
# Templates. Placeholders: {v} the value, {old} the previous value, {a_v}/{a_old} with an article,
# {species}, {a_species}, {pet}, {pron} (possessive), {relation}, {relative}.

_STATIC_TEMPLATES: dict[str, tuple[str, ...]] = {
    "food": (
        "Honestly, nothing beats {v}. It's my favourite food by a mile.",
        "I made {v} again last night; it's my all-time favourite food.",
        "My favourite food will always be {v}, no contest.",
    ),
    "relative": (
        "My {relation} {relative} is coming to stay with me next month.",
        "I had a long call with my {relation} {relative} last night.",
        "My {relation} {relative} keeps sending me memes at two in the morning.",
    ),
    "hometown": (
        "This drizzle reminds me of {v}, where I grew up.",
        "I grew up in {v}, so I'm used to grey winters.",
        "Nothing beats the summers back in {v}, the city I grew up in.",
    ),
}
_INITIAL_TEMPLATES: dict[str, tuple[str, ...]] = {
    "city": (
        "Life here in {v} is pretty quiet at the moment.",
        "I've been living in {v} for a few years now and still find new cafés.",
        "The trams here in {v} were a mess again this week.",
    ),
    "job": (
        "Work keeps me busy. Being {a_v} is never boring.",
        "I've been working as {a_v} for about five years now.",
        "Long week at work. That's life as {a_v}, I suppose.",
    ),
    "hobby": (
        "My weekends are all about {v} at the moment.",
        "I spent all of Sunday on {v}. It's my favourite way to switch off.",
        "I've been really into {v} lately.",
    ),
    "language": (
        "I'm learning {v} on my commute, slowly.",
        "My {v} lessons are going okay, I can order a coffee now.",
        "I practise {v} with an app every evening.",
    ),
    "car": (
        "My old {v} broke down again this morning.",
        "I drove my {v} up to the lake last weekend.",
        "The {v} needs new tyres, which is annoying.",
    ),
}
# Every update and event says "today" so the date in the turn's header is the answer to "when".
_UPDATE_TEMPLATES: dict[str, tuple[str, ...]] = {
    "city": (
        "Big news: I moved to {v} today! There are boxes everywhere.",
        "Today was moving day. I'm officially living in {v} now.",
        "I said goodbye to {old} and moved to {v} today.",
    ),
    "job": (
        "Today was my first day as {a_v}! Still nervous.",
        "I started my new job as {a_v} today.",
        "I'm done being {a_old}: today I started working as {a_v}.",
    ),
    "hobby": (
        "I took up {v} today. I think I'm hooked already.",
        "I've gone off {old}; today I started {v} instead.",
        "Today I tried {v} for the first time and signed up for more.",
    ),
    "language": (
        "I dropped {old} and started learning {v} today.",
        "Today I had my very first {v} lesson!",
        "I switched to learning {v} today; {old} just wasn't clicking.",
    ),
    "car": (
        "I sold my {old} and picked up my new {v} today!",
        "I picked up my new {v} today. Goodbye, old {old}.",
        "Today I finally traded in the {old} for a shiny {v}.",
    ),
}
_PET_TEMPLATES = (
    "I adopted {a_species} today! {pron} name is {pet}.",
    "Meet {pet}, the {species} I adopted today.",
    "Today we brought home {a_species} called {pet}.",
)
_EVENT_TEMPLATES: dict[str, tuple[str, ...]] = {
    "concert": ("I saw {v} live tonight. What a show!", "Tonight I finally got to see {v} in concert."),
    "race": ("I ran the {v} today and actually finished!", "Today I completed the {v}. My legs are jelly."),
    "trip": ("I got back from a week in {v} today.", "Just got home today from my trip to {v}."),
    "book": ('I finished reading "{v}" today. What an ending.', 'Today I finally finished "{v}".'),
}

_GREETINGS = ("Hey {other}! How have you been?", "Hi {other}, long time no chat!", "Morning {other}! Got a minute?")
_GREETING_REPLIES = ("Hey! Pretty good, thanks. You?", "Hi! All good here, busy as always.", "Hello! Yes, finally.")
_CLOSINGS = (
    "I should get going. Talk soon!",
    "Anyway, I'd better run. Catch up next week?",
    "Right, dinner time. Bye!",
)
_CLOSING_REPLIES = ("Sure, take care!", "Bye for now!", "Talk soon!")
_PROMPTS = ("So what's new with you, {owner}?", "Any news on your side?", "What have you been up to?")
# Baseline facts get a mild acknowledgement, news gets excitement.
_ACKNOWLEDGEMENTS = ("Oh really?", "Ha, fair enough.", "I didn't know that!", "Sounds about right.", "Makes sense.")
_REACTIONS = (
    "That's huge, congratulations!",
    "Wow, how exciting!",
    "Oh, I love that for you.",
    "That's a big change! How do you feel about it?",
    "Nice! You'll have to tell me more next time.",
    "Good for you!",
    "No way, that's amazing.",
)
# Small talk carries no pool value, so it adds retrieval noise without adding facts. Each line has a mood so
# the reply fits it.
_FILLERS: tuple[tuple[str, str], ...] = (
    ("The weather has been so grey all week.", "bad"),
    ("Did you catch the match on Sunday?", "question"),
    ("I've been drinking way too much coffee lately.", "bad"),
    ("My neighbour is renovating and the drilling never stops.", "bad"),
    ("I finally fixed the leaky tap in the bathroom.", "good"),
    ("I'm trying to go to bed earlier, with mixed results.", "bad"),
    ("Have you watched anything good recently?", "question"),
    ("My phone screen cracked again, typical.", "bad"),
    ("I found a great new podcast about old shipwrecks.", "good"),
    ("The supermarket was packed this afternoon.", "bad"),
    ("I'm thinking of repainting the living room.", "good"),
    ("It's been ages since I had a proper lie-in.", "bad"),
    ("I spent the evening sorting old photos.", "good"),
    ("The traffic this morning was unbelievable.", "bad"),
    ("Any plans for the weekend?", "question"),
    ("I tried a new recipe and burnt it completely.", "bad"),
    ("My houseplants are finally recovering.", "good"),
    ("Do you ever feel like this year is flying by?", "question"),
    ("I've started going for short walks after lunch.", "good"),
    ("My internet kept dropping out all evening.", "bad"),
)
_FILLER_REPLIES: dict[str, tuple[str, ...]] = {
    "bad": ("Ugh, I know the feeling.", "Oh no! Hope it gets better.", "Tell me about it.", "Same here, honestly."),
    "good": ("That sounds nice, actually.", "I've been meaning to do the same.", "Love that.", "Oh, good for you."),
    "question": ("Not really, it's been a quiet one.", "Hmm, nothing comes to mind.", "A little, yes!", "Ha, not yet."),
}

# Question templates. {name} the persona, {ident} a description that picks out one persona.
_Q_STATIC = {
    "food": ("What is {name}'s favourite food?", "Which food does {name} love most?"),
    "relative": ("What is the name of {name}'s {relation}?", "What is {name}'s {relation} called?"),
    "hometown": ("Where did {name} grow up?", "Which city did {name} grow up in?"),
}
_Q_PET_NAME = ("What is the name of {name}'s {species}?", "What did {name} name the {species}?")
_Q_PET_SPECIES = ("What kind of animal is {pet}?", "What type of pet is {pet}?")
_Q_EVENT = {
    "concert": ("Which band did {name} see live?", "When did {name} see {v} live?"),
    "race": ("Which race did {name} complete?", "When did {name} complete the {v}?"),
    "trip": ("Which country did {name} travel to?", "When did {name} get back from {v}?"),
    "book": ("Which book did {name} finish reading?", 'When did {name} finish reading "{v}"?'),
}
_Q_WHEN_UPDATE = {
    "city": "When did {name} move to {v}?",
    "job": "When did {name} start working as {a_v}?",
    "hobby": "When did {name} take up {v}?",
    "language": "When did {name} start learning {v}?",
    "car": "When did {name} get the {v}?",
}
_Q_WHEN_PET = "When did {name} adopt {pet}?"
_Q_CURRENT = {
    "city": ("Where does {ident} live now?", "Which city does {ident} live in now?"),
    "job": ("What does {ident} do for a living now?", "What is the current job of {ident}?"),
    "hobby": ("Which hobby is {ident} into these days?", "What hobby does {ident} currently do?"),
    "language": ("Which language is {ident} learning now?", "What language is {ident} currently studying?"),
    "car": ("What car does {ident} drive now?", "Which car does {ident} currently own?"),
}
_Q_FOOD_OF = ("What is the favourite food of {ident}?",)
_IDENTIFIERS = {
    "pet": ("the owner of {pet}", "the person who adopted {pet}"),
    "relative": ("the person whose {relation} is {relative}",),
    "hometown": ("the person who grew up in {v}",),
    "former_job": ("the person who used to work as {a_v}",),
}


def _article(noun: str) -> str:
    return f"{'an' if noun[0].lower() in 'aeiou' else 'a'} {noun}"


# ---------------------------------------------------------------------------------------------------------
# The plan: who knows what, and in which session each fact is said.


@dataclass
class _Fact:
    """One statement, said by its owner in one session; ``turn_id`` is set when the session is laid out."""

    owner: int
    session: int
    text: str
    news: bool = False  # a change or event, as opposed to a standing fact
    turn_id: str = ""


@dataclass
class _Persona:
    name: str
    sessions: list[int]
    relation: str = ""
    relative: str = ""
    static: dict[str, tuple[str, _Fact]] = field(default_factory=dict)  # kind -> (value, fact)
    chains: dict[str, list[tuple[str, _Fact]]] = field(default_factory=dict)  # attribute -> values over time
    pets: list[tuple[str, str, _Fact]] = field(default_factory=list)  # (species, name, fact)
    events: list[tuple[str, str, _Fact]] = field(default_factory=list)  # (kind, value, fact)


class _Pools:
    """Draws values without replacement, so no value is ever shared between two facts."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._left: dict[int, list[str]] = {}

    def draw(self, pool: tuple[str, ...]) -> str:
        left = self._left.setdefault(id(pool), list(pool))
        return left.pop(self._rng.randrange(len(left)))


def _session_dates(rng: random.Random, sessions: int) -> list[str]:
    day = date(rng.randint(2021, 2023), rng.randint(1, 12), rng.randint(1, 28))
    dates: list[str] = []
    for _ in range(sessions):
        # Month names are spelled out by hand: strftime("%B") would follow the machine's locale.
        dates.append(f"{day.day} {MONTHS[day.month - 1]} {day.year}")
        day += timedelta(days=rng.randint(6, 30))
    return dates


def _participants(rng: random.Random, sessions: int, personas: int) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    counts = [0] * personas
    for _ in range(sessions):
        # The two who have talked least go next (random tie-break), so everyone gets enough sessions.
        first, second = sorted(range(personas), key=lambda p: (counts[p], rng.random()))[:2]
        counts[first] += 1
        counts[second] += 1
        pairs.append((first, second) if rng.random() < 0.5 else (second, first))
    return pairs


def _plan_persona(rng: random.Random, pools: _Pools, index: int, name: str, sessions: list[int]) -> _Persona:
    persona = _Persona(name=name, sessions=sessions)
    # Baseline facts come in the persona's first quarter of sessions and every change after it, so an old value
    # is always stated in an earlier session than its replacement.
    cut = max(1, len(sessions) // 4)
    early, later = sessions[:cut], sessions[cut:]

    def fact(session: int, templates: tuple[str, ...], news: bool = False, **values: str) -> _Fact:
        return _Fact(owner=index, session=session, text=rng.choice(templates).format(**values), news=news)

    # Gender-neutral relations, because the name pool is not split by gender.
    persona.relation = rng.choice(("cousin", "best friend"))
    persona.relative = pools.draw(FIRST_NAMES)
    pool: tuple[str, ...]
    for kind, pool in (("food", FOODS), ("hometown", CITIES)):
        value = pools.draw(pool)
        persona.static[kind] = (value, fact(rng.choice(early), _STATIC_TEMPLATES[kind], v=value))
    persona.static["relative"] = (
        persona.relative,
        fact(rng.choice(early), _STATIC_TEMPLATES["relative"], relation=persona.relation, relative=persona.relative),
    )

    for attribute, pool in UPDATABLE.items():
        first = pools.draw(pool)
        chain = [(first, fact(rng.choice(early), _INITIAL_TEMPLATES[attribute], v=first, a_v=_article(first)))]
        moves = 2 if attribute == "city" and len(later) >= 2 and rng.random() < 0.5 else 1
        for session in sorted(rng.sample(later, moves)):
            old, new = chain[-1][0], pools.draw(pool)
            text_values = {"v": new, "a_v": _article(new), "old": old, "a_old": _article(old)}
            chain.append((new, fact(session, _UPDATE_TEMPLATES[attribute], news=True, **text_values)))
        persona.chains[attribute] = chain

    pet_count = min(rng.choice((1, 2)), len(later))
    for species, session in zip(rng.sample(PET_SPECIES, pet_count), sorted(rng.sample(later, pet_count))):
        pet = pools.draw(PET_NAMES)
        values = {"species": species, "a_species": _article(species), "pet": pet, "pron": rng.choice(("Her", "His"))}
        persona.pets.append((species, pet, fact(session, _PET_TEMPLATES, news=True, **values)))

    for kind in rng.sample(sorted(EVENT_POOLS), rng.choice((2, 3))):
        value = pools.draw(EVENT_POOLS[kind])
        persona.events.append((kind, value, fact(rng.choice(later), _EVENT_TEMPLATES[kind], news=True, v=value)))
    return persona


def _all_facts(persona: _Persona) -> list[_Fact]:
    facts = [f for _, f in persona.static.values()]
    facts += [f for chain in persona.chains.values() for _, f in chain]
    facts += [f for *_, f in persona.pets] + [f for *_, f in persona.events]
    return facts


# ---------------------------------------------------------------------------------------------------------
# Rendering sessions into turns


def _render_session(
    rng: random.Random, number: int, day: str, pair: tuple[int, int], names: list[str], facts: list[_Fact],
    granularity: Granularity,
) -> list[RawText]:
    lines: list[tuple[int, str, _Fact | None]] = []
    first, second = pair

    def other(speaker: int) -> int:
        return second if speaker == first else first

    lines.append((first, rng.choice(_GREETINGS).format(other=names[second]), None))
    lines.append((second, rng.choice(_GREETING_REPLIES), None))
    items: list[_Fact | None] = list(facts) + [None] * rng.randint(2, 5)
    rng.shuffle(items)
    for item in items:
        if item is None:
            speaker = rng.choice(pair)
            line, mood = rng.choice(_FILLERS)
            lines.append((speaker, line, None))
            lines.append((other(speaker), rng.choice(_FILLER_REPLIES[mood]), None))
            continue
        if rng.random() < 0.4:
            lines.append((other(item.owner), rng.choice(_PROMPTS).format(owner=names[item.owner]), None))
        lines.append((item.owner, item.text, item))
        if rng.random() < 0.8:
            lines.append((other(item.owner), rng.choice(_REACTIONS if item.news else _ACKNOWLEDGEMENTS), None))
    closer = rng.choice(pair)
    lines.append((closer, rng.choice(_CLOSINGS), None))
    lines.append((other(closer), rng.choice(_CLOSING_REPLIES), None))

    turns: list[tuple[str, str]] = []
    for position, (speaker, utterance, fact) in enumerate(lines, start=1):
        turn_id = f"D{number}:{position}"
        if fact is not None:
            fact.turn_id = turn_id
        turns.append((turn_id, f"{names[speaker]}: {utterance}"))
    return dialogue_texts(number, day, turns, granularity)


# ---------------------------------------------------------------------------------------------------------
# Questions


@dataclass
class _Candidate:
    owner: int
    question: str
    answer: str
    evidence: list[_Fact]


def _single_hop(rng: random.Random, owner: int, p: _Persona) -> list[_Candidate]:
    out: list[_Candidate] = []
    for kind, (value, f) in p.static.items():
        question = rng.choice(_Q_STATIC[kind]).format(name=p.name, relation=p.relation)
        out.append(_Candidate(owner, question, value, [f]))
    for species, pet, f in p.pets:
        out.append(_Candidate(owner, rng.choice(_Q_PET_NAME).format(name=p.name, species=species), pet, [f]))
        out.append(_Candidate(owner, rng.choice(_Q_PET_SPECIES).format(pet=pet), species, [f]))
    for kind, value, f in p.events:
        out.append(_Candidate(owner, _Q_EVENT[kind][0].format(name=p.name), value, [f]))
    return out


def _temporal(owner: int, p: _Persona, dates: list[str]) -> list[_Candidate]:
    out: list[_Candidate] = []
    for attribute, chain in p.chains.items():
        for value, f in chain[1:]:  # the baseline value has no "when"
            question = _Q_WHEN_UPDATE[attribute].format(name=p.name, v=value, a_v=_article(value))
            out.append(_Candidate(owner, question, dates[f.session], [f]))
    for _, pet, f in p.pets:
        out.append(_Candidate(owner, _Q_WHEN_PET.format(name=p.name, pet=pet), dates[f.session], [f]))
    for kind, value, f in p.events:
        out.append(_Candidate(owner, _Q_EVENT[kind][1].format(name=p.name, v=value), dates[f.session], [f]))
    return out


def _knowledge_update(rng: random.Random, owner: int, p: _Persona) -> list[_Candidate]:
    out: list[_Candidate] = []
    for attribute, chain in p.chains.items():
        value, f = chain[-1]
        out.append(_Candidate(owner, rng.choice(_Q_CURRENT[attribute]).format(ident=p.name), value, [f]))
    return out


def _multi_hop(rng: random.Random, owner: int, p: _Persona) -> list[_Candidate]:
    identifiers: list[tuple[str, str, _Fact]] = []  # (kind, description, fact)
    for _, pet, f in p.pets:
        identifiers.append(("pet", rng.choice(_IDENTIFIERS["pet"]).format(pet=pet), f))
    relative_text = _IDENTIFIERS["relative"][0].format(relation=p.relation, relative=p.relative)
    identifiers.append(("relative", relative_text, p.static["relative"][1]))
    hometown, hometown_fact = p.static["hometown"]
    identifiers.append(("hometown", _IDENTIFIERS["hometown"][0].format(v=hometown), hometown_fact))
    old_job, old_job_fact = p.chains["job"][0]
    identifiers.append(("former_job", _IDENTIFIERS["former_job"][0].format(a_v=_article(old_job)), old_job_fact))

    out: list[_Candidate] = []
    for kind, description, id_fact in identifiers:
        for attribute, chain in p.chains.items():
            if kind == "former_job" and attribute == "job":
                continue  # that would be a knowledge-update question in disguise
            value, f = chain[-1]
            question = rng.choice(_Q_CURRENT[attribute]).format(ident=description)
            out.append(_Candidate(owner, question, value, [id_fact, f]))
        food, food_fact = p.static["food"]
        out.append(_Candidate(owner, _Q_FOOD_OF[0].format(ident=description), food, [id_fact, food_fact]))
    return out


def _pick(rng: random.Random, candidates: list[_Candidate], count: int, personas: int) -> list[_Candidate]:
    # Shuffle within each persona, then deal round-robin, so the questions cover every persona evenly.
    per_owner = [[c for c in candidates if c.owner == owner] for owner in range(personas)]
    for group in per_owner:
        rng.shuffle(group)
    dealt = [group[i] for i in range(max(map(len, per_owner), default=0)) for group in per_owner if i < len(group)]
    return dealt[:count]


# ---------------------------------------------------------------------------------------------------------


def make_synthetic(seed: int = 0, sessions: int = 16, personas: int = 2, questions_per_category: int = 10,
                   granularity: Granularity = "session") -> Task:
    """Generate the synthetic task for ``seed``.

    ``granularity`` "session" (the default) makes each session one raw text, "turn" each dialogue turn, as
    for LoCoMo (``mstar_ray.families.qa.dialogue``); the conversation and the questions are the same either way,
    and question evidence always names turns.

    ``questions_per_category`` is an upper bound: with few personas a category can have fewer distinct
    questions (knowledge-update has exactly five per persona). The task is named ``synthetic/seed-<seed>``,
    with the other arguments (and ``/turns`` for one text per turn) appended when they differ from the
    defaults so that different tasks never share a name.
    """
    if not 2 <= personas <= MAX_PERSONAS:
        raise InputError(f"personas must be between 2 and {MAX_PERSONAS}, got {personas}")
    if questions_per_category < 1:
        raise InputError(f"questions_per_category must be at least 1, got {questions_per_category}")
    rng = random.Random(seed)
    pairs = _participants(rng, sessions, personas)
    attendance = [[s for s, pair in enumerate(pairs) if p in pair] for p in range(personas)]
    fewest = min(len(a) for a in attendance)
    if fewest < MIN_SESSIONS_PER_PERSONA:
        raise InputError(
            f"{sessions} sessions are too few for {personas} personas: each persona needs at least "
            f"{MIN_SESSIONS_PER_PERSONA} sessions, the least-seen one gets {fewest}"
        )

    pools = _Pools(rng)
    names = [pools.draw(FIRST_NAMES) for _ in range(personas)]
    plan = [_plan_persona(rng, pools, index, names[index], attendance[index]) for index in range(personas)]
    dates = _session_dates(rng, sessions)

    by_session: list[list[_Fact]] = [[] for _ in range(sessions)]
    for persona in plan:
        for fact in _all_facts(persona):
            by_session[fact.session].append(fact)
    texts: list[RawText] = []
    for number, (day, pair, facts) in enumerate(zip(dates, pairs, by_session), start=1):
        texts.extend(_render_session(rng, number, day, pair, names, facts, granularity))

    builders = {
        "single-hop": lambda owner, p: _single_hop(rng, owner, p),
        "temporal": lambda owner, p: _temporal(owner, p, dates),
        "knowledge-update": lambda owner, p: _knowledge_update(rng, owner, p),
        "multi-hop": lambda owner, p: _multi_hop(rng, owner, p),
    }
    questions: list[Item] = []
    for category in CATEGORIES:
        candidates = [c for owner, p in enumerate(plan) for c in builders[category](owner, p)]
        for candidate in _pick(rng, candidates, questions_per_category, personas):
            questions.append(
                Item(
                    id=f"seed-{seed}/q{len(questions)}",
                    question=candidate.question,
                    answer=candidate.answer,
                    category=category,
                    evidence=[f.turn_id for f in candidate.evidence],
                )
            )

    name = f"synthetic/seed-{seed}"
    if (sessions, personas, questions_per_category) != (16, 2, 10):
        name += f"/sessions-{sessions}-personas-{personas}-q-{questions_per_category}"
    return Task(name=name + granularity_suffix(granularity), texts=texts, items=questions)


def from_config(config: SyntheticOptions) -> Task:
    """The registry's loader: the world of ``config.seed``, its questions limited round-robin over categories."""
    task = make_synthetic(seed=config.seed, sessions=config.sessions, personas=config.personas,
                          questions_per_category=config.questions_per_category, granularity=config.granularity)
    return task.model_copy(update={"items": limit_items(task.items, config.limit)})
