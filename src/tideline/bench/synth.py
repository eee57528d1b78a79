"""Synthetic facts and queries for the scaling benchmark (like realMemory's ``bench_recall``).

Every fact names a person, an attribute and a value, plus a unique ticket code.
Three query kinds are drawn from the facts:

* paraphrase — the same question in other words (no shared ticket code);
* exact — only the fact's ticket code (``QX-48213``), as an agent pastes an error id;
* noise — a question about a person who is not in the store (must abstain).

Distractors come for free: every person has several facts, and every attribute
value recurs across people, so a query must match person *and* attribute.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["Fact", "Query", "generate"]

_FIRST = ("Mira Lena Deniz Dima Jonas Aiko Priya Omar Sofia Mateo Ines Yusuf Hana Lars Noor "
          "Elif Tomas Zara Ravi Ingrid Kofi Mei Pavel Amara Felix Leila Bruno Anya Theo Selin "
          "Hugo Nadia Emil Chen Rosa Ivan Maya Olga Sami Vera").split()
_LAST = ("Okafor Lindqvist Tanaka Novak Haddad Schulz Moreau Petrov Costa Weber Kowalski "
         "Rossi Ibrahim Fischer Nakamura Jensen Dubois Popescu Silva Kaur Becker Horvat "
         "Yilmaz Andersen Kim Ortiz Meyer Volkov Nguyen Braun").split()

# (attribute, fact template, paraphrase question, values)
_ATTRS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("city", "{p} moved to {v} last spring", "where does {p} live now?",
     ("Lisbon", "Leipzig", "Osaka", "Tbilisi", "Montreal", "Nairobi", "Krakow", "Valencia")),
    ("pet", "{p} adopted a {v} from the shelter", "what animal did {p} take home?",
     ("greyhound", "tabby cat", "parrot", "tortoise", "ferret", "rabbit", "hedgehog")),
    ("database", "{p}'s team runs their service on {v}", "which datastore does {p} use at work?",
     ("PostgreSQL", "MongoDB", "ClickHouse", "SQLite", "Cassandra", "Redis", "DynamoDB")),
    ("diet", "{p} stopped eating {v} for health reasons", "what food does {p} avoid?",
     ("gluten", "dairy", "red meat", "sugar", "peanuts", "shellfish", "soy")),
    ("instrument", "{p} has been learning the {v} for two years",
     "which musical instrument is {p} practising?",
     ("cello", "banjo", "harmonica", "oboe", "ukulele", "drums", "violin")),
    ("editor", "{p} writes all code in {v}", "what text editor does {p} prefer?",
     ("Neovim", "Emacs", "VS Code", "Helix", "Sublime Text", "IntelliJ", "Zed")),
    ("sport", "{p} plays {v} every Thursday evening", "what does {p} do for exercise weekly?",
     ("badminton", "water polo", "squash", "climbing", "rugby", "table tennis", "futsal")),
    ("allergy", "{p} is allergic to {v}", "what is {p} allergic to?",
     ("bee stings", "penicillin", "pollen", "latex", "cats", "dust mites", "mould")),
    ("car", "{p} drives an old {v}", "what kind of car does {p} have?",
     ("Volvo estate", "Fiat Panda", "Land Rover", "Toyota Prius", "Skoda Octavia", "VW van")),
    ("language", "{p} is taking evening classes in {v}", "which language is {p} studying?",
     ("Japanese", "Portuguese", "Finnish", "Swahili", "Korean", "Greek", "Turkish")),
)


@dataclass(frozen=True)
class Fact:
    """One synthetic fact."""

    key: int
    text: str
    person: str
    attr: str
    code: str


@dataclass(frozen=True)
class Query:
    """One synthetic query; ``expected`` is a fact key or None for noise."""

    kind: str
    text: str
    expected: int | None


def _people(rng: random.Random, n: int) -> list[str]:
    capacity = len(_FIRST) * len(_FIRST) * 20 * len(_LAST)
    if n > capacity // 2:
        raise ValueError(f"cannot draw {n} distinct names (capacity {capacity})")
    names: set[str] = set()
    while len(names) < n:
        first, second = rng.choice(_FIRST), rng.choice(_FIRST)
        last = rng.choice(_LAST)
        # A second given name and a middle initial widen the namespace to ~1M people.
        middle = rng.choice("ABCDEFGHJKLMNPRSTVWZ")
        names.add(f"{first}-{second} {middle}. {last}")
    return sorted(names)


def generate(n: int, queries: int, seed: int = 7) -> tuple[list[Fact], list[Query]]:
    """Generate ``n`` facts and ``queries`` queries (⅖ paraphrase, ⅖ exact, ⅕ noise).

    Args:
        n: number of facts.
        queries: number of queries.
        seed: random seed (the same seed gives the same data).

    Returns:
        The facts and the queries.
    """
    rng = random.Random(seed)
    per_person = len(_ATTRS)
    people = _people(rng, n // per_person + 2 + queries)
    stored, absent = people[: n // per_person + 2], people[n // per_person + 2:]
    facts: list[Fact] = []
    codes: set[str] = set()
    for i in range(n):
        person = stored[i // per_person]
        attr, template, _, values = _ATTRS[i % per_person]
        code = ""
        while not code or code in codes:
            code = f"{rng.choice('QXZKVW')}{rng.choice('QXZKVW')}-{rng.randint(10000, 99999)}"
        codes.add(code)
        text = f"{template.format(p=person, v=rng.choice(values))} (ticket {code})."
        facts.append(Fact(i, text, person, attr, code))
    out: list[Query] = []
    for q in range(queries):
        roll = q % 5
        if roll in (0, 1):
            f = facts[rng.randrange(n)]
            question = next(a[2] for a in _ATTRS if a[0] == f.attr)
            out.append(Query("paraphrase", question.format(p=f.person), f.key))
        elif roll in (2, 3):
            f = facts[rng.randrange(n)]
            out.append(Query("exact", f.code, f.key))
        else:
            person = absent[q % len(absent)]
            question = rng.choice(_ATTRS)[2]
            out.append(Query("noise", question.format(p=person), None))
    return facts, out
