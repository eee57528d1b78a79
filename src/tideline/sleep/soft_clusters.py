"""Sleep step ``clusters``: k-means soft clusters in embedding space, plus their adjacency.

Per scope (clusters never mix projects, like the vector spaces they come from),
with N live memories:

* k = max(5, int(√N · 1.5)), at most N;
* k-means with scikit-learn on the L2-normalised vectors — ``KMeans`` up to
  2,000 memories, ``MiniBatchKMeans`` beyond, fitted on a sample (about 40
  memories per centroid, at least 10,000, at most ``cluster_sample``) —
  warm-started from the previous centroids, so cluster ids stay stable across
  sleeps (a new centroid takes over the id of the old one it is closest to,
  cosine ≥ 0.5);
* every memory joins its ``cluster_memberships`` (3) nearest centroids (soft
  assignment; rank 0 is its home cluster);
* adjacency: how many memories two clusters share; recall routes a query
  through the clusters adjacent to its nearest ones
  (:mod:`tideline.recall.routing`);
* labels: the top keywords of each cluster by class-based TF-IDF over its
  members' keywords.

A full rebuild runs when forced, when the scope has no clusters yet, when it
grew or shrank by ``rebuild_growth`` since the last build, or when that build is
older than ``rebuild_after_hours``; otherwise memories without a membership are
assigned to the existing centroids (cheap, every sleep).
"""

from __future__ import annotations

import importlib
import math
from typing import TYPE_CHECKING, Any

from tideline.quiet import quiet
from tideline.sleep.context import SleepContext

if TYPE_CHECKING:
    import numpy as np

__all__ = ["cluster_count", "run"]

_SMALL = 2_000
_REUSE_COS = 0.5
_CHUNK = 8_192


def cluster_count(n: int) -> int:
    """k for n memories: max(5, int(√n · 1.5)), never more than n."""
    return min(n, max(5, int(math.sqrt(n) * 1.5))) if n > 0 else 0


def run(ctx: SleepContext) -> dict[str, Any]:
    """Rebuild or extend the soft clusters of every scope.

    Returns:
        Metrics: scopes rebuilt and extended, clusters, memberships, seconds of k-means.
    """
    t, cons, now = ctx.tuning, ctx.cons, ctx.now
    built: dict[str, dict[str, float]] = cons.get_json("clusters.built", {})
    by_scope = cons.live_ids_by_scope()
    stats: dict[str, Any] = {"scopes": len(by_scope), "rebuilt": 0, "extended": 0, "k": 0,
                             "clusters": 0, "memberships": 0, "assigned": 0}
    for scope in {c["scope"] for c in cons.emb_clusters()} - set(by_scope):
        cons.replace_emb_clusters(scope, [], [], [], now)
        built.pop(scope, None)
    for scope, ids in sorted(by_scope.items()):
        info = built.get(scope)
        has = bool(cons.centroids([scope]))
        n = len(ids)
        due = (ctx.force or info is None or not has
               or n > info["n"] * (1 + t.rebuild_growth) or n < info["n"] * (1 - t.rebuild_growth)
               or now - info["at"] > t.rebuild_after_hours * 3600)
        if due:
            k, kept, members = _rebuild(ctx, scope, ids)
            built[scope] = {"n": n, "at": now}
            stats["rebuilt"] += 1
            stats["k"] += k
            stats["clusters"] += kept
            stats["memberships"] += members
        else:
            assigned = _extend(ctx, scope)
            stats["extended"] += 1
            stats["assigned"] += assigned
            stats["clusters"] += len(cons.centroids([scope]))
    cons.put_state("clusters.built", built)
    return stats


def _load(ctx: SleepContext, scope: str, ids: list[int] | None) -> tuple[list[int], np.ndarray]:
    import numpy as np

    dim = ctx.rt.embedder.dim
    wanted = set(ids) if ids is not None else None
    keys: list[int] = []
    blobs: list[bytes] = []
    for batch in ctx.cons.vector_blobs(scope, None if ids is None or len(ids) > 5_000 else ids):
        for key, blob in batch:
            if wanted is None or key in wanted:
                keys.append(key)
                blobs.append(blob)
    if not keys:
        return [], np.zeros((0, dim), dtype=np.float32)
    x = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(keys), dim).copy()
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x /= np.maximum(norms, 1e-12)
    return keys, x


def _top(x: np.ndarray, c: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosines of the m nearest centroids per row, nearest first."""
    import numpy as np

    idx_out = np.zeros((len(x), m), dtype=np.int64)
    sim_out = np.zeros((len(x), m), dtype=np.float32)
    for lo in range(0, len(x), _CHUNK):
        s = x[lo:lo + _CHUNK] @ c.T
        if m < s.shape[1]:
            part = np.argpartition(-s, m - 1, axis=1)[:, :m]
        else:
            part = np.tile(np.arange(s.shape[1]), (len(s), 1))
        ps = np.take_along_axis(s, part, axis=1)
        order = np.argsort(-ps, axis=1, kind="stable")
        idx_out[lo:lo + _CHUNK] = np.take_along_axis(part, order, axis=1)
        sim_out[lo:lo + _CHUNK] = np.take_along_axis(ps, order, axis=1)
    return idx_out, sim_out


def _old(ctx: SleepContext, scope: str) -> tuple[list[int], np.ndarray]:
    import numpy as np

    rows = ctx.cons.centroids([scope])
    dim = ctx.rt.embedder.dim
    if not rows:
        return [], np.zeros((0, dim), dtype=np.float32)
    mat = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
    return [r[0] for r in rows], mat


def _fit(x: np.ndarray, k: int, init: np.ndarray | None, sample: int) -> np.ndarray:
    import numpy as np
    from sklearn.cluster import KMeans, MiniBatchKMeans

    n = len(x)
    if n <= _SMALL:
        # threadpoolctl (a scikit-learn dependency) ships no type information.
        threadpool_limits = importlib.import_module("threadpoolctl").threadpool_limits

        # Random restarts: k-means++ seeding costs about a second per run here (384-d);
        # one thread: for a few thousand points thread start-up dominates the work.
        km: Any = KMeans(n_clusters=k, init=init if init is not None else "random",
                         n_init=1 if init is not None else 4, random_state=0, max_iter=100)
        with threadpool_limits(limits=1), quiet():
            km.fit(x)
    else:
        rng = np.random.default_rng(0)
        # ~40 points per centroid are plenty to place it; the rest is assigned afterwards.
        size = min(n, sample, max(10_000, 40 * k))
        fit_on = x if n <= size else x[rng.choice(n, size, replace=False)]
        km = MiniBatchKMeans(
            n_clusters=k, init=init if init is not None else "random", n_init=1,
            batch_size=min(4_096, len(fit_on)), max_iter=6, max_no_improvement=3,
            random_state=0, reassignment_ratio=0.01,
        )
        with quiet():
            km.fit(fit_on)
    c = np.asarray(km.cluster_centers_, dtype=np.float32)
    c /= np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
    return c


def _rebuild(ctx: SleepContext, scope: str, ids: list[int]) -> tuple[int, int, int]:
    """Cluster one scope from scratch; returns k, clusters kept (with members), memberships."""
    import numpy as np

    keys, x = _load(ctx, scope, ids)
    n = len(keys)
    if n == 0:
        ctx.cons.replace_emb_clusters(scope, [], [], [], ctx.now)
        return 0, 0, 0
    k = requested = cluster_count(n)
    old_ids, old = _old(ctx, scope)
    init = None
    if len(old_ids) and old.shape[1] == x.shape[1]:
        take = old[:k]
        if len(take) < k:
            rng = np.random.default_rng(len(old_ids))
            extra = x[rng.choice(n, k - len(take), replace=False)]
            take = np.vstack([take, extra])
        init = np.ascontiguousarray(take, dtype=np.float32)
    c = _fit(x, k, init, ctx.tuning.cluster_sample)
    m = min(ctx.tuning.cluster_memberships, k)
    idx, sim = _top(x, c, m)
    used = np.unique(idx)
    remap = {int(old_k): new_k for new_k, old_k in enumerate(used.tolist())}
    c = c[used]
    idx = np.vectorize(remap.__getitem__)(idx) if len(used) < k else idx
    k = len(used)
    reuse = _match(c, old_ids, old)
    sizes = np.bincount(idx[:, 0], minlength=k)
    labels = _labels(ctx, keys, idx[:, 0], k)
    clusters = [{"key": j, "reuse": reuse.get(j), "label": labels[j][0], "keywords": labels[j][1],
                 "size": int(sizes[j]), "centroid": c[j].tobytes()} for j in range(k)]
    members = [(keys[i], r, int(idx[i, r]), round(float(sim[i, r]), 4))
               for i in range(n) for r in range(m)]
    ctx.cons.replace_emb_clusters(scope, clusters, members, _adjacency(idx, k), ctx.now)
    return requested, k, len(members)


def _match(c: np.ndarray, old_ids: list[int], old: np.ndarray) -> dict[int, int]:
    """new cluster index → old id it inherits (greedy by cosine, each used once)."""
    import numpy as np

    if not old_ids or old.shape[1] != c.shape[1]:
        return {}
    s = c @ old.T
    out: dict[int, int] = {}
    taken: set[int] = set()
    for flat in np.argsort(-s, axis=None):
        i, j = divmod(int(flat), s.shape[1])
        if s[i, j] < _REUSE_COS:
            break
        if i in out or j in taken:
            continue
        out[i] = old_ids[j]
        taken.add(j)
    return out


def _adjacency(idx: np.ndarray, k: int) -> list[tuple[int, int, int]]:
    import numpy as np

    m = idx.shape[1]
    codes = []
    for a in range(m):
        for b in range(a + 1, m):
            lo = np.minimum(idx[:, a], idx[:, b])
            hi = np.maximum(idx[:, a], idx[:, b])
            keep = lo != hi
            codes.append(lo[keep] * k + hi[keep])
    if not codes:
        return []
    uniq, counts = np.unique(np.concatenate(codes), return_counts=True)
    return [(int(u // k), int(u % k), int(n)) for u, n in zip(uniq, counts, strict=True)]


def _labels(ctx: SleepContext, keys: list[int], home: np.ndarray,
            k: int) -> list[tuple[str, list[str]]]:
    """Top three keywords per cluster by class-based TF-IDF."""
    import numpy as np
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.feature_extraction.text import TfidfTransformer

    kws = ctx.keyword_map()
    docs: list[dict[str, int]] = [{} for _ in range(k)]
    for key, cl in zip(keys, home.tolist(), strict=True):
        doc = docs[cl]
        for w, n in kws.get(key, {}).items():
            doc[w] = doc.get(w, 0) + n
    out: list[tuple[str, list[str]]] = [("", []) for _ in range(k)]
    if not any(docs):
        return out
    vec = DictVectorizer(dtype=np.float32)
    with quiet():
        x = TfidfTransformer(sublinear_tf=True).fit_transform(vec.fit_transform(docs)).tocsr()
    vocab = vec.get_feature_names_out()
    for j in range(k):
        lo, hi = x.indptr[j], x.indptr[j + 1]
        if lo == hi:
            continue
        best = np.argsort(-x.data[lo:hi], kind="stable")[:3]
        words = [str(vocab[x.indices[lo + b]]) for b in best]
        out[j] = (" · ".join(words), words)
    return out


def _extend(ctx: SleepContext, scope: str) -> int:
    """Assign memories without a membership to the scope's existing centroids."""
    missing = ctx.cons.members_missing(scope)
    if not missing:
        return 0
    keys, x = _load(ctx, scope, missing)
    cids, c = _old(ctx, scope)
    if not keys or not cids:
        return 0
    m = min(ctx.tuning.cluster_memberships, len(cids))
    idx, sim = _top(x, c, m)
    members = [(keys[i], r, cids[int(idx[i, r])], round(float(sim[i, r]), 4))
               for i in range(len(keys)) for r in range(m)]
    adj = [(cids[a], cids[b], n) for a, b, n in _adjacency(idx, len(cids))]
    ctx.cons.add_emb_members(members, adj, ctx.now)
    return len(keys)
