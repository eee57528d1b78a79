"""Sleep step ``topics``: keyword topic clusters filtered by document frequency.

Keywords per memory come from :mod:`tideline.sleep.keywords` (jieba POS nouns,
verbs and adjectives for Chinese; content words for other languages; tags),
cached per memory version. Over all live memories of the namespace:

* a keyword in more than ``topic_generic_df`` (20 %) of the memories is
  *generic* and dropped (never below 3 memories, so a small store keeps topics);
* a keyword with fewer than ``topic_min_occurrences`` (3) occurrences in total
  is *noise* and dropped;
* each memory joins the clusters of its ``topic_keywords_per_memory`` best
  surviving keywords by TF-IDF (scikit-learn's ``TfidfTransformer``).

A topic cluster is one keyword in one scope with at least ``topic_min_size``
members — the seed's precise singleton clusters ("边界" hits exactly 28
memories). Clusters never mix scopes, so a project's topics never show another
project's words. The optional Jaccard merge (``topic_merge``, off by default:
at a few hundred memories it cascades into mega-clusters) joins keyword
clusters of a scope whose member sets overlap by at least
``topic_merge_jaccard`` into connected components.

Between full rebuilds (see :func:`run`) memories written since the last one join
the existing clusters of their best keywords, scored with the document
frequencies of that rebuild — cheap enough for a sleep after every answer.
"""

from __future__ import annotations

import json
from typing import Any

from tideline.sleep.context import SleepContext

__all__ = ["build", "run"]


def run(ctx: SleepContext) -> dict[str, Any]:
    """Rebuild the topic clusters, or assign new memories to them between rebuilds.

    A full rebuild runs when forced, on the first sleep, when the store grew or shrank
    by ``rebuild_growth`` since the last one, or after ``rebuild_after_hours``.

    Returns:
        Metrics: memories, vocabulary before/after the DF filter, clusters, memberships.
    """
    t, cons, now = ctx.tuning, ctx.cons, ctx.now
    built = cons.get_json("topics.built")
    n = cons.live_count()
    due = (ctx.force or built is None or n > built["n"] * (1 + t.rebuild_growth)
           or n < built["n"] * (1 - t.rebuild_growth)
           or now - built["at"] > t.rebuild_after_hours * 3600)
    if not due:
        return _extend(ctx, built)
    max_id = cons.max_memory_id()
    kws = ctx.keyword_map()
    scope_of = {int(r[0]): str(r[2]) for r in cons.text_rows()}
    clusters, stats = build(kws, scope_of, t)
    stats["memberships"] = cons.replace_topics(clusters, now)
    cons.put_state("topics.built", {"n": n, "at": now, "max_id": max_id, "docs": stats["memories"],
                                    "df": stats.pop("kept_df")})
    stats["mode"] = "rebuilt"
    return stats


def _extend(ctx: SleepContext, built: dict[str, Any]) -> dict[str, Any]:
    """Put memories written since the last rebuild into the existing keyword clusters."""
    import math

    from tideline.sleep.keywords import extract, memory_text

    t, cons = ctx.tuning, ctx.cons
    df: dict[str, int] = built["df"]
    docs = max(1, int(built["docs"]))
    index = cons.topic_index()
    rows: list[tuple[int, int, float]] = []
    fresh = cons.text_rows(after_id=int(built["max_id"]))
    for mid, _v, scope, gesture, context, direction, tags in fresh:
        kws = extract(memory_text(gesture, context, direction), json.loads(tags),
                      exact_pos=t.topic_exact_pos)
        scored = {w: (1 + math.log(c)) * (math.log((1 + docs) / (1 + df[w])) + 1)
                  for w, c in kws.items() if w in df}
        norm = math.sqrt(sum(v * v for v in scored.values())) or 1.0
        best = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
        for w, v in best[: t.topic_keywords_per_memory]:
            cid = index.get((str(scope), w))
            if cid is not None:
                rows.append((cid, int(mid), round(v / norm, 4)))
    added = cons.add_topic_members(rows)
    if fresh:
        cons.put_state("topics.built", {**built, "max_id": max(int(r[0]) for r in fresh)})
    return {"mode": "extended", "memories": len(fresh), "memberships": added}


def build(
    keywords: dict[int, dict[str, int]], scope_of: dict[int, str], t: Any,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Topic clusters from keyword counts.

    Args:
        keywords: memory id → keyword counts.
        scope_of: memory id → scope.
        t: the :class:`~tideline.config.SleepTuning`.

    Returns:
        The clusters (scope, label, keywords, df, members as (id, score)) and counters.
    """
    import numpy as np
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.feature_extraction.text import TfidfTransformer

    ids = [m for m in keywords if m in scope_of]
    stats: dict[str, Any] = {"memories": len(ids), "vocabulary": 0, "kept": 0, "generic": 0,
                             "noise": 0, "clusters": 0, "merged": 0, "kept_df": {}}
    if not ids:
        return [], stats
    vec = DictVectorizer(dtype=np.float32, sort=True)
    counts = vec.fit_transform([keywords[m] for m in ids]).tocsc()
    vocab = np.asarray(vec.get_feature_names_out())
    n = len(ids)
    df = np.diff(counts.indptr)
    occurrences = np.asarray(counts.sum(axis=0)).ravel()
    generic = df > max(t.topic_generic_df * n, 3)
    noise = occurrences < t.topic_min_occurrences
    keep = np.flatnonzero(~generic & ~noise)
    stats.update(vocabulary=int(len(vocab)), kept=int(len(keep)), generic=int(generic.sum()),
                 noise=int((noise & ~generic).sum()),
                 kept_df={str(vocab[j]): int(df[j]) for j in keep})
    if not len(keep):
        return [], stats
    tfidf = TfidfTransformer(sublinear_tf=True).fit_transform(counts[:, keep]).tocsr()
    per = max(1, t.topic_keywords_per_memory)
    groups: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for row in range(n):
        lo, hi = tfidf.indptr[row], tfidf.indptr[row + 1]
        if lo == hi:
            continue
        cols = tfidf.indices[lo:hi]
        vals = tfidf.data[lo:hi]
        best = np.argsort(-vals, kind="stable")[:per]
        mid = ids[row]
        for b in best:
            groups.setdefault((scope_of[mid], int(cols[b])), []).append(
                (mid, round(float(vals[b]), 4)))
    clusters: list[dict[str, Any]] = [
        {"scope": scope, "keywords": [str(vocab[keep[col]])], "label": str(vocab[keep[col]]),
         "df": float(df[keep[col]]) / n, "members": members}
        for (scope, col), members in groups.items() if len(members) >= t.topic_min_size
    ]
    if t.topic_merge and clusters:
        before = len(clusters)
        clusters = _merge(clusters, t.topic_merge_jaccard)
        stats["merged"] = before - len(clusters)
    clusters.sort(key=lambda c: (c["scope"], -len(c["members"]), c["label"]))
    stats["clusters"] = len(clusters)
    return clusters, stats


def _merge(clusters: list[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    """Join clusters of the same scope whose Jaccard overlap ≥ threshold (components)."""
    out: list[dict[str, Any]] = []
    by_scope: dict[str, list[dict[str, Any]]] = {}
    for c in clusters:
        by_scope.setdefault(c["scope"], []).append(c)
    for scope, group in by_scope.items():
        of_memory: dict[int, list[int]] = {}
        for j, c in enumerate(group):
            for m, _ in c["members"]:
                of_memory.setdefault(m, []).append(j)
        inter: dict[tuple[int, int], int] = {}
        for js in of_memory.values():
            for x in range(len(js)):
                for y in range(x + 1, len(js)):
                    key = (js[x], js[y])
                    inter[key] = inter.get(key, 0) + 1
        parent = list(range(len(group)))
        for (a, b), n in inter.items():
            union = len(group[a]["members"]) + len(group[b]["members"]) - n
            if union and n / union >= threshold:
                parent[_find(parent, a)] = _find(parent, b)
        comps: dict[int, list[dict[str, Any]]] = {}
        for j, c in enumerate(group):
            comps.setdefault(_find(parent, j), []).append(c)
        for parts in comps.values():
            parts.sort(key=lambda c: (-len(c["members"]), c["label"]))
            members: dict[int, float] = {}
            for c in parts:
                for m, s in c["members"]:
                    members[m] = max(members.get(m, 0.0), s)
            words = [w for c in parts for w in c["keywords"]]
            out.append({"scope": scope, "keywords": words, "label": " · ".join(words[:3]),
                        "df": max(c["df"] for c in parts),
                        "members": sorted(members.items(), key=lambda kv: (-kv[1], kv[0]))})
    return out


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i
