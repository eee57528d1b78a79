"""Keywords (jieba POS for Chinese, a tokenizer for the rest) and DF-filtered topic clusters."""

from __future__ import annotations

import dataclasses

from tideline import Memory
from tideline.config import SleepTuning
from tideline.sleep.keywords import extract
from tideline.sleep.topics import build


def test_chinese_keeps_nouns_verbs_adjectives_and_drops_particles() -> None:
    kws = extract("她拒绝了那个讨论边界的请求，因为逃避不是办法。边界很重要，我们害怕冲突。")
    assert kws["边界"] == 2
    assert {"拒绝", "逃避", "重要", "害怕", "冲突"} <= set(kws)  # verbs and adjectives too
    assert not {"了", "的", "我们", "因为", "那个", "很"} & set(kws)


def test_other_languages_use_content_words() -> None:
    en = extract("The loader's CSV parser rejected the whale-listen column again")
    assert {"loader", "csv", "parser", "rejected", "whale-listen", "column"} <= set(en)
    assert not {"the", "again"} & set(en)
    de = extract("Die Pipeline läuft jeden Abend und die Datenbank wird gesichert")
    assert {"pipeline", "läuft", "abend", "datenbank", "gesichert"} <= set(de)
    assert not {"die", "und", "wird"} & set(de)
    ru = extract("База данных проекта работает на отдельном сервере")
    assert {"база", "данных", "проекта", "сервере"} <= set(ru)
    assert "на" not in ru
    assert extract("x", tags=["Ops", "ops"])["ops"] == 2


def _store(n: int) -> tuple[dict[int, dict[str, int]], dict[int, str]]:
    kws: dict[int, dict[str, int]] = {}
    for i in range(n):
        doc = {"memory": 1, f"unique{i}": 1}  # "memory" is everywhere: generic
        if i < 6:
            doc["postgres"] = 1  # 6 of 40 = 15 %: a topic
        if i in (7, 8):
            doc["rare"] = 1  # 2 occurrences: noise
        if i in (10, 11, 12):
            doc["kafka"] = 1
        kws[i] = doc
    return kws, {i: ("atlas" if i < 3 or i >= 10 else "global") for i in range(n)}


def test_document_frequency_filter_and_scoped_clusters() -> None:
    kws, scopes = _store(40)
    clusters, stats = build(kws, scopes, SleepTuning())
    labels = {(c["scope"], c["label"]): c for c in clusters}
    assert stats["generic"] >= 1 and stats["noise"] >= 1
    assert ("atlas", "postgres") in labels and ("global", "postgres") in labels
    assert sorted(m for m, _ in labels[("atlas", "postgres")]["members"]) == [0, 1, 2]
    assert sorted(m for m, _ in labels[("global", "postgres")]["members"]) == [3, 4, 5]
    assert ("atlas", "kafka") in labels
    assert not any(c["label"] in ("memory", "rare") for c in clusters)
    assert all(c["scope"] == scopes[m] for c in clusters for m, _ in c["members"])


def test_jaccard_merge_is_optional() -> None:
    kws = {i: {"alpha": 1, "beta": 1, f"u{i}": 1} for i in range(5)}
    kws.update({i: {f"u{i}": 1, f"v{i % 3}": 1} for i in range(5, 30)})
    scopes = dict.fromkeys(kws, "global")
    plain, _ = build(kws, scopes, SleepTuning())
    merged, stats = build(kws, scopes, dataclasses.replace(SleepTuning(), topic_merge=True))
    assert {"alpha", "beta"} <= {c["label"] for c in plain}
    assert stats["merged"] >= 1
    both = [c for c in merged if set(c["keywords"]) >= {"alpha", "beta"}]
    assert len(both) == 1 and len(both[0]["members"]) == 5


def test_topics_step_writes_clusters_readable_by_scope(mem: Memory) -> None:
    atlas = ["postgres replication lag paged the on-call", "postgres vacuum blocked a deploy",
             "the postgres upgrade needs a maintenance window", "postgres backups verified"]
    orchard = ["kafka consumer group rebalanced twice", "kafka retention raised to seven days",
               "kafka broker disk filled overnight", "kafka topics renamed for billing"]
    filler = ["pottery glaze cracked in the kiln", "the cat knocked over a plant",
              "rain delayed the football match", "a new bakery opened downtown",
              "the library extended its hours", "violin lessons moved to thursday",
              "tomatoes ripened early this year", "the bridge repaint finished",
              "a heron nested by the pond", "chess club meets on mondays",
              "the bike chain snapped again", "fresh snow on the mountain pass"]
    for text in atlas:
        mem.write(text, scope="atlas")
    for text in orchard:
        mem.write(text, scope="orchard")
    for text in filler:
        mem.write(text)
    assert mem.introspect()["memories"] == 20
    res = mem.sleep(only="topics")["steps"]["topics"]
    assert res["clusters"] > 0 and res["memberships"] > 0
    atlas = mem.topics(scope="atlas")
    assert any(t["label"] == "postgres" for t in atlas)
    assert {t["scope"] for t in atlas} <= {"atlas", "global"}
    assert not any(t["label"] == "kafka" for t in atlas)
    assert any(t["label"] == "kafka" for t in mem.topics(all_scopes=True))
