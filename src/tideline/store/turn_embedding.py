"""The vector of a raw turn: its own text's embedding, leaning towards the turn before it.

A reply such as "yes, last Tuesday" means little alone; with the question it answers
it becomes findable by meaning. Embedding each turn together with its predecessor
(the old way) costs every text twice; instead each turn's own text is embedded once
and its stored vector is ``normalize(own + PREV_WEIGHT · previous own)``, the
previous turn's own vector being computed in the same batch (only the first turn of
a batch whose predecessor is stored already costs one extra embedding).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tideline.embed.base import Embedder, Vectors

__all__ = ["PREV_WEIGHT", "embed_jobs", "embed_turns"]

PREV_WEIGHT = 0.5


def embed_turns(
    embedder: Embedder | None, own: Sequence[str], previous: Sequence[str | None],
    weight: float | None = None, known: dict[str, np.ndarray] | None = None,
    passages: Callable[[Sequence[str]], Vectors | None] | None = None,
) -> Vectors | None:
    """Context vectors of turns given their own texts and their predecessors' (or None).

    Every distinct text is embedded once, so a batch of consecutive turns costs one
    embedding per turn. ``known`` holds own vectors already computed (the previous
    chunk's, in an import); it is replaced by this call's own vectors. ``passages``
    (default: the embedder's) may return None when the embedder is unavailable; then
    so does this, and the turns are stored with their vectors pending.

    Raises:
        ValueError: ``own`` and ``previous`` differ in length.
        EmbedderError: the embedder failed.
    """
    lean = PREV_WEIGHT if weight is None else weight
    if len(own) != len(previous):
        raise ValueError("own and previous must have the same length")
    have = known if known is not None else {}
    unique = [t for t in dict.fromkeys([*own, *(p for p in previous if p)]) if t not in have]
    if not own:
        return np.zeros((0, embedder.dim if embedder else 0), dtype=np.float32)
    fresh = None
    if unique:
        embed = passages or (embedder.embed_passages if embedder else None)
        if embed is None:
            raise ValueError("embed_turns needs an embedder or a passages function")
        got = embed(unique)
        if got is None:
            return None
        fresh = np.asarray(got, dtype=np.float32)
    vec = dict(have)
    if fresh is not None:
        vec.update(zip(unique, fresh, strict=True))
    out = np.stack([vec[t] for t in own]).astype(np.float32)
    for i, prev in enumerate(previous):
        if prev:
            out[i] += lean * vec[prev]
    if known is not None:
        known.clear()
        known.update((t, vec[t]) for t in own)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    result: Vectors = out / np.maximum(norms, 1e-12)
    return result

def embed_jobs(
    embedder: Embedder, jobs: Sequence[tuple[str, int, str, str | None]]
) -> list[np.ndarray]:
    """Vectors of :func:`embedding_jobs` entries: a memory's text, a turn's context vector
    (:func:`~tideline.store.turn_embedding.embed_turns`), in order.

    Raises:
        EmbedderError: the embedder failed.
    """
    out: list[np.ndarray] = [np.zeros(0, dtype=np.float32)] * len(jobs)
    mems = [i for i, j in enumerate(jobs) if j[0].startswith("m:")]
    turns = [i for i, j in enumerate(jobs) if not j[0].startswith("m:")]
    if mems:
        for i, v in zip(mems, embedder.embed_passages([jobs[i][2] for i in mems]), strict=True):
            out[i] = v
    if turns:
        vecs = embed_turns(embedder, [jobs[i][2] for i in turns], [jobs[i][3] for i in turns])
        assert vecs is not None  # the embedder's own passages raise rather than return None
        for i, v in zip(turns, vecs, strict=True):
            out[i] = v
    return out
