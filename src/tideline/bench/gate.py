"""Novelty-gate benchmark: ``python -m tideline.bench gate [--embedder e5] [--seed 7]``.

Does the gate tell a restatement from a correction? Pairs of texts (first stored, then
written) are generated in English, German and Chinese from templates with slots (a
person, a project, a number — as digits or as a word —, a version, a day, a city, tabs
or spaces), in five categories:

* ``restatement`` — the same fact again: retyped (case, final stop), with a filler
  ("Remember:", "Zur Erinnerung:", "提醒：") or a number as digits instead of a word.
  The gate should **potentiate**;
* ``slot`` — the same sentence with one slot changed (another person, number, version,
  day, city, tabs → spaces). A correction: never potentiate;
* ``negation`` — the same sentence negated (happen → never happen, 部署 → 不部署);
* ``tail`` — two long texts (far past the embedder's 512-token window) that differ only
  in their last sentence;
* ``unrelated`` — two different facts of the same language, each paired with its
  nearest neighbour (by the embedder) among facts of other templates and projects: the
  hard negatives. The gate should write them as **new**, never link them.

Every pair is embedded by the embedder named and judged by the write path's gate
(:func:`~tideline.write.path.judge`, given the pair's cosine); the decisions make a
confusion matrix per category and language. A sample of the pairs (``--store-sample``)
is also written through a real store, one scope per pair, and the report says how many
of them the write path decided the same way.
Beside it, the decisions of the gate as it was before the whole-text comparison (the
cosine, then :func:`~tideline.write.path.new_details`) from the same cosines, and both
gates' potentiation rate on the ``real`` bench's paraphrase pairs (``real.json``
duplicates marked ``same``).

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tideline.bench.real import load
from tideline.embed import Embedder, make_embedder
from tideline.embed.base import ThresholdProfile
from tideline.memory import Memory
from tideline.write.path import gate_decision, judge, new_details

__all__ = ["CATEGORIES", "LANGS", "Pair", "before_decision", "generate", "main", "run"]

CATEGORIES = ("restatement", "slot", "negation", "tail", "unrelated")
"""The pair categories (see the module's docstring)."""
DECISIONS = ("potentiate", "correct", "link", "new")
LANGS = ("en", "de", "zh")
"""The languages pairs are generated in."""


@dataclass(frozen=True)
class Pair:
    """One generated pair: ``first`` is stored, then ``then`` is written."""

    lang: str
    category: str
    first: str
    then: str


# Each template: the text with {slots}, its negated form, and the slots it uses.
_EN = [
    ("{name} reviews the {proj} release every {day}",
     "{name} never reviews the {proj} release on {day}"),
    ("The {proj} cache TTL is {nw} minutes", "The {proj} cache TTL is not {nw} minutes"),
    ("The {proj} API token rotates every {n} days",
     "The {proj} API token does not rotate every {n} days"),
    ("{proj} runs on PostgreSQL {ver}", "{proj} no longer runs on PostgreSQL {ver}"),
    ("Use {indent} for indentation in the {proj} repo",
     "Do not use {indent} for indentation in the {proj} repo"),
    ("The {proj} nightly job retries {nw} times before it pages {name}",
     "The {proj} nightly job never retries before it pages {name}"),
    ("Deploys of {proj} happen on {day}s", "Deploys of {proj} never happen on {day}s"),
    ("{name} owns the on-call rotation for {proj} this quarter",
     "{name} does not own the on-call rotation for {proj} this quarter"),
    ("The {proj} staging server sits in the {city} data center",
     "The {proj} staging server is not in the {city} data center"),
    ("{name} wants the {proj} reports in the team channel by {n} am",
     "{name} doesn't want the {proj} reports in the team channel by {n} am"),
]
_DE = [
    ("{name} prüft das {proj}-Release jeden {day}",
     "{name} prüft das {proj}-Release nie am {day}"),
    ("Der Cache von {proj} läuft nach {nw} Minuten ab",
     "Der Cache von {proj} läuft nicht nach {nw} Minuten ab"),
    ("Das API-Token von {proj} wird alle {n} Tage erneuert",
     "Das API-Token von {proj} wird nicht alle {n} Tage erneuert"),
    ("{proj} läuft auf PostgreSQL {ver}", "{proj} läuft nicht mehr auf PostgreSQL {ver}"),
    ("Im {proj}-Repo wird mit {indent} eingerückt",
     "Im {proj}-Repo wird nicht mit {indent} eingerückt"),
    ("Der nächtliche Job von {proj} versucht es {nw} Mal, bevor er {name} alarmiert",
     "Der nächtliche Job von {proj} versucht es kein Mal, bevor er {name} alarmiert"),
    ("Deployments von {proj} finden am {day} statt",
     "Deployments von {proj} finden nie am {day} statt"),
    ("{name} übernimmt in diesem Quartal die Rufbereitschaft für {proj}",
     "{name} übernimmt in diesem Quartal keine Rufbereitschaft für {proj}"),
    ("Der Staging-Server von {proj} steht im Rechenzentrum in {city}",
     "Der Staging-Server von {proj} steht nicht im Rechenzentrum in {city}"),
    ("{name} will die Berichte von {proj} bis {n} Uhr im Teamkanal haben",
     "{name} will die Berichte von {proj} nicht bis {n} Uhr im Teamkanal haben"),
]
_ZH = [
    ("{name}负责审核{proj}的发布，每个{day}一次", "{name}不负责审核{proj}的发布，每个{day}一次"),
    ("{proj}的缓存过期时间是{nw}分钟", "{proj}的缓存过期时间不是{nw}分钟"),
    ("{proj}的API令牌每{n}天轮换一次", "{proj}的API令牌不是每{n}天轮换一次"),
    ("{proj}运行在PostgreSQL {ver}上", "{proj}没有运行在PostgreSQL {ver}上"),
    ("{proj}仓库用{indent}缩进", "{proj}仓库不用{indent}缩进"),
    ("{proj}的夜间任务失败后会重试{nw}次，然后通知{name}",
     "{proj}的夜间任务失败后不会重试，然后通知{name}"),
    ("{proj}每个{day}部署", "{proj}每个{day}从不部署"),
    ("{name}这个季度负责{proj}的值班", "{name}这个季度不负责{proj}的值班"),
    ("{proj}的测试服务器放在{city}的机房里", "{proj}的测试服务器没有放在{city}的机房里"),
    ("{name}希望每天{n}点前在群里看到{proj}的报告",
     "{name}不希望每天{n}点前在群里看到{proj}的报告"),
]
TEMPLATES = {"en": _EN, "de": _DE, "zh": _ZH}

_NAMES = {"en": ["Deniz", "Lena", "Mira", "Igor", "Ahmed", "Priya", "Tomas", "Sofia"],
          "de": ["Deniz", "Lena", "Mira", "Jonas", "Katrin", "Lukas", "Petra", "Sven"],
          "zh": ["张伟", "李娜", "王芳", "刘洋", "陈静", "杨帆", "赵磊", "孙丽"]}
_PROJECTS = ["atlas", "orchard", "beacon", "harbor", "nimbus", "quarry", "lantern", "meadow"]
_DAYS = {"en": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
         "de": ["Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag"],
         "zh": ["周一", "周二", "周三", "周四", "周五"]}
_CITIES = {"en": ["Frankfurt", "Dublin", "Tokyo", "Oregon", "Singapore"],
           "de": ["Frankfurt", "Falkenstein", "Nürnberg", "Berlin", "Wien"],
           "zh": ["上海", "北京", "深圳", "杭州", "成都"]}
_INDENT = {"en": ["tabs", "spaces"], "de": ["Tabs", "Leerzeichen"], "zh": ["制表符", "空格"]}
# Numbers as words with their digits: (word, digits).
_NUMBER_WORDS = {"en": [("two", "2"), ("three", "3"), ("five", "5"), ("ten", "10"),
                        ("twelve", "12"), ("seven", "7")],
                 "de": [("zwei", "2"), ("drei", "3"), ("fünf", "5"), ("zehn", "10"),
                        ("zwölf", "12"), ("sieben", "7")],
                 "zh": [("两", "2"), ("三", "3"), ("五", "5"), ("十", "10"), ("十二", "12"),
                        ("七", "7")]}
_DIGITS = ["7", "9", "14", "30", "60", "90"]
_VERSIONS = ["13", "14", "15", "16", "17"]
_FILLERS = {"en": ["Remember: ", "Note: ", "FYI, ", "Reminder: "],
            "de": ["Zur Erinnerung: ", "Hinweis: ", "Bitte merken: ", "Nochmal: "],
            "zh": ["提醒：", "注意：", "记住，", "再说一下，"]}
_TAILS = {
    "en": [("Root cause: disk full.", "Root cause: expired certificate."),
           ("The fix was deployed by Lena.", "The fix was deployed by Deniz."),
           ("It took 40 minutes to recover.", "It took 90 minutes to recover."),
           ("The alert fired in time.", "The alert never fired.")],
    "de": [("Ursache: Festplatte voll.", "Ursache: abgelaufenes Zertifikat."),
           ("Den Fix hat Lena ausgerollt.", "Den Fix hat Deniz ausgerollt."),
           ("Die Wiederherstellung dauerte 40 Minuten.",
            "Die Wiederherstellung dauerte 90 Minuten."),
           ("Der Alarm kam rechtzeitig.", "Der Alarm kam nicht.")],
    "zh": [("根本原因：磁盘已满。", "根本原因：证书过期。"),
           ("修复由李娜上线。", "修复由张伟上线。"),
           ("恢复用了四十分钟。", "恢复用了九十分钟。"),
           ("告警及时触发了。", "告警没有触发。")],
}
_PREAMBLE = {
    "en": "Step {i}: the operator checked the queue depth, the replica lag and the disk usage "
          "on node {i} of the {proj} cluster and wrote the readings into the incident log.",
    "de": "Schritt {i}: Die Bereitschaft prüfte die Warteschlange, den Replikationsverzug und "
          "den Plattenplatz auf Knoten {i} des {proj}-Clusters und notierte die Werte im "
          "Störungsprotokoll.",
    "zh": "第{i}步：值班人员检查了{proj}集群第{i}号节点的队列深度、副本延迟和磁盘使用情况，"
          "并把读数写进了事故日志。",
}


def _slots(lang: str, rnd: random.Random) -> dict[str, str]:
    word, digits = rnd.choice(_NUMBER_WORDS[lang])
    return {"name": rnd.choice(_NAMES[lang]), "proj": rnd.choice(_PROJECTS),
            "day": rnd.choice(_DAYS[lang]), "city": rnd.choice(_CITIES[lang]),
            "indent": rnd.choice(_INDENT[lang]), "nw": word, "_digits": digits,
            "n": rnd.choice(_DIGITS), "ver": rnd.choice(_VERSIONS)}


def _fill(template: str, slots: dict[str, str]) -> str:
    return template.format(**{k: v for k, v in slots.items() if not k.startswith("_")})


def _changed(lang: str, template: str, slots: dict[str, str],
             rnd: random.Random) -> dict[str, str] | None:
    """The slots with one slot the template uses set to another value (None: none to change)."""
    used = [k for k in ("name", "day", "city", "indent", "nw", "n", "ver")
            if "{" + k + "}" in template]
    if not used:
        return None
    key = rnd.choice(used)
    pool: dict[str, list[str]] = {"name": _NAMES[lang], "day": _DAYS[lang],
                                  "city": _CITIES[lang], "indent": _INDENT[lang],
                                  "nw": [w for w, _ in _NUMBER_WORDS[lang]], "n": _DIGITS,
                                  "ver": _VERSIONS}
    other = rnd.choice([v for v in pool[key] if v != slots[key]])
    return slots | {key: other}


def _restated(lang: str, text: str, template: str, slots: dict[str, str],
              rnd: random.Random) -> str:
    how = rnd.randrange(4)
    if how == 0 and "{nw}" in template:  # the number as digits
        return _fill(template, slots | {"nw": slots["_digits"]})
    if how == 1:
        return rnd.choice(_FILLERS[lang]) + (text[0].lower() + text[1:] if lang != "de"
                                             else text)
    if how == 2:
        return text + ("。" if lang == "zh" else ".")
    return text[0].lower() + text[1:] + ("！" if lang == "zh" else "!")


def generate(seed: int = 7, per_lang: int = 200) -> list[Pair]:
    """The generated pairs (without ``unrelated``, which needs the embedder: see :func:`run`).

    Args:
        seed: the random seed.
        per_lang: pairs per language (split over the four categories).

    Returns:
        The pairs.
    """
    rnd = random.Random(seed)
    out: list[Pair] = []
    # Long texts cost a full 512-token embedding each: fewer of them.
    shares = {"restatement": 0.3, "slot": 0.3, "negation": 0.15, "tail": 0.04}
    for lang in LANGS:
        templates = TEMPLATES[lang]
        for category, share in shares.items():
            for i in range(max(2, int(per_lang * share))):
                plain, negated = templates[i % len(templates)]
                slots = _slots(lang, rnd)
                first = _fill(plain, slots)
                if category == "restatement":
                    then = _restated(lang, first, plain, slots, rnd)
                elif category == "slot":
                    changed = _changed(lang, plain, slots, rnd)
                    then = _fill(plain, changed) if changed else first
                elif category == "negation":
                    then = _fill(negated, slots)
                    if rnd.random() < 0.5:  # negated first, then affirmed
                        first, then = then, first
                else:
                    a, b = _TAILS[lang][i % len(_TAILS[lang])]
                    sep = "" if lang == "zh" else " "
                    pre = sep.join(_PREAMBLE[lang].format(i=k, proj=slots["proj"])
                                   for k in range(20))
                    first, then = pre + sep + a, pre + sep + b
                out.append(Pair(lang, category, first, then))
    return out


def _unrelated(embedder: Embedder, seed: int, per_lang: int) -> list[Pair]:
    """For each of ``per_lang`` facts per language, its nearest fact of another template
    and another project (hard negatives)."""
    rnd = random.Random(seed + 1)
    out: list[Pair] = []
    for lang in LANGS:
        facts: list[tuple[int, str, str]] = []
        for _ in range(4 * per_lang):
            t = rnd.randrange(len(TEMPLATES[lang]))
            slots = _slots(lang, rnd)
            facts.append((t, slots["proj"], _fill(TEMPLATES[lang][t][0], slots)))
        vecs = embedder.embed_passages([f[2] for f in facts])
        sims = vecs @ vecs.T
        for i in range(per_lang):
            ok = [j for j in range(len(facts))
                  if facts[j][0] != facts[i][0] and facts[j][1] != facts[i][1]]
            j = max(ok, key=lambda k: float(sims[i, k]))
            out.append(Pair(lang, "unrelated", facts[i][2], facts[j][2]))
    return out


def before_decision(new: str, old: str, similarity: float, profile: ThresholdProfile) -> str:
    """The gate's decision before the whole-text comparison (ed15f9c): the cosine, and a
    potentiation demoted to a link when the new text holds a detail the old one lacks."""
    decision = gate_decision(similarity, profile.same, profile.related)
    if decision == "potentiate" and new_details(new, old):
        return "link"
    return decision


def _matrix(rows: Iterable[tuple[Pair, str]]) -> dict[str, Any]:
    by_cat: dict[str, dict[str, int]] = {c: dict.fromkeys(DECISIONS, 0) for c in CATEGORIES}
    by_lang: dict[str, dict[str, dict[str, int]]] = {
        lang: {c: dict.fromkeys(DECISIONS, 0) for c in CATEGORIES} for lang in LANGS}
    for pair, decision in rows:
        by_cat[pair.category][decision] += 1
        by_lang[pair.lang][pair.category][decision] += 1
    corrections = sum(by_cat[c]["potentiate"] for c in ("slot", "negation", "tail"))
    n_corr = sum(sum(by_cat[c].values()) for c in ("slot", "negation", "tail"))
    unrelated = by_cat["unrelated"]
    n_un = max(1, sum(unrelated.values()))
    restated = by_cat["restatement"]
    return {
        "by_category": by_cat, "by_language": by_lang,
        "corrections_potentiated": corrections, "corrections": n_corr,
        "corrections_kept_as_correct": sum(by_cat[c]["correct"]
                                           for c in ("slot", "negation", "tail")),
        "unrelated_linked_rate": round((unrelated["link"] + unrelated["correct"]
                                        + unrelated["potentiate"]) / n_un, 4),
        "restatements_potentiated_rate": round(
            restated["potentiate"] / max(1, sum(restated.values())), 4),
    }


def _paraphrases(embedder: Embedder) -> dict[str, Any]:
    """Both gates' potentiation rate on the ``real`` bench's paraphrase pairs."""
    data = load()
    facts = {f["id"]: f["text"] for f in data.facts}
    pairs = [(facts[d["a"]], d["b_text"]) for d in data.duplicates if d["relation"] == "same"]
    a = embedder.embed_passages([p[0] for p in pairs])
    b = embedder.embed_passages([p[1] for p in pairs])
    sims = np.sum(a * b, axis=1)
    profile = embedder.profile
    floor = min(profile.related, profile.abstain)
    before = sum(before_decision(new, old, float(s), profile) == "potentiate"
                 for (old, new), s in zip(pairs, sims, strict=True))
    after = sum(judge(new, old, float(s), profile.same, profile.related, floor)[0]
                == "potentiate" for (old, new), s in zip(pairs, sims, strict=True))
    return {"pairs": len(pairs), "before": before, "after": after,
            "before_rate": round(before / len(pairs), 4),
            "after_rate": round(after / len(pairs), 4),
            "after_over_before": round(after / before, 4) if before else None}


def run(embedder_name: str = "e5", seed: int = 7, per_lang: int = 200,
        store_sample: int = 30) -> dict[str, Any]:
    """Generate the pairs, judge each with the gate, and count.

    Args:
        embedder_name: the embedder family (e5 by default).
        seed: the random seed of the generated pairs.
        per_lang: generated pairs per language for the four written categories, and
            a quarter of it more unrelated pairs.
        store_sample: pairs also written through a real store, to check that the write
            path decides as the gate function does (0: none).

    Returns:
        The report (see the module's docstring).
    """
    t0 = time.perf_counter()
    embedder = make_embedder(embedder_name)
    pairs = generate(seed, per_lang) + _unrelated(embedder, seed, per_lang // 4)
    profile = embedder.profile
    floor = min(profile.related, profile.abstain)
    first = embedder.embed_passages([p.first for p in pairs])
    then = embedder.embed_passages([p.then for p in pairs])
    sims = [float(s) for s in np.sum(first * then, axis=1)]
    before = [(p, before_decision(p.then, p.first, s, profile))
              for p, s in zip(pairs, sims, strict=True)]
    after = [(p, judge(p.then, p.first, s, profile.same, profile.related, floor)[0])
             for p, s in zip(pairs, sims, strict=True)]
    # The same decisions through the real write path (a store, one scope per pair), for
    # a sample spread over the categories and languages: the gate above is the write
    # path's, fed the same cosines, and this checks that it is.
    step = max(1, len(pairs) // max(1, store_sample)) if store_sample else 0
    sample = list(range(0, len(pairs), step))[:store_sample] if step else []
    agree = 0
    with tempfile.TemporaryDirectory(prefix="tideline-gate-") as tmp, \
            Memory.open(Path(tmp) / "s", embedder=embedder, project="global") as mem:
        for n in sample:
            pair = pairs[n]
            mem.remember(pair.first, scope=f"p{n}")
            agree += mem.remember(pair.then, scope=f"p{n}").decision == after[n][1]
    mistakes = [{"category": p.category, "lang": p.lang, "decision": d,
                 "first": p.first[-120:], "then": p.then[-120:]}
                for p, d in after
                if (p.category == "restatement" and d != "potentiate")
                or (p.category in ("slot", "negation", "tail") and d == "potentiate")
                or (p.category == "unrelated" and d != "new")]
    return {
        "embedder": embedder_name, "seed": seed, "pairs": len(pairs),
        "pairs_by_language": {lang: sum(p.lang == lang for p in pairs) for lang in LANGS},
        "after": _matrix(after), "before": _matrix(before),
        "real_paraphrases": _paraphrases(embedder),
        "write_path_check": {"pairs": len(sample), "same_decision": agree},
        "mistakes": mistakes[:40],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench gate")
    parser.add_argument("--embedder", default="e5", help="e5 (default), hashing or http")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--per-lang", type=int, default=200,
                        help="generated pairs per language (plus a quarter more unrelated)")
    parser.add_argument("--store-sample", type=int, default=30,
                        help="pairs also written through a real store (0: none)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.embedder, args.seed, args.per_lang, args.store_sample),
                     ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
