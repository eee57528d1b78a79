"""The vector of a raw turn: its own text's embedding, leaning towards the turn before it.

A reply such as "yes, last Tuesday" means little alone; with the question it answers
it becomes findable by meaning. Embedding each turn together with its predecessor
(the old way) costs every text twice; instead each turn's own text is embedded once
and its stored vector is ``normalize(own + PREV_WEIGHT · previous own)``, the
previous turn's own vector being computed in the same batch (only the first turn of
a batch whose predecessor is stored already costs one extra embedding).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tideline.embed.base import Embedder, Vectors

__all__ = ["PREV_WEIGHT", "embed_turns"]

PREV_WEIGHT = 0.5


def embed_turns(
    embedder: Embedder, own: Sequence[str], previous: Sequence[str | None],
    weight: float | None = None, known: dict[str, np.ndarray] | None = None,
) -> Vectors:
    """Context vectors of turns given their own texts and their predecessors' (or None).

    Every distinct text is embedded once, so a batch of consecutive turns costs one
    embedding per turn. ``known`` holds own vectors already computed (the previous
    chunk's, in an import); it is replaced by this call's own vectors.

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
        return np.zeros((0, embedder.dim), dtype=np.float32)
    fresh = np.asarray(embedder.embed_passages(unique), dtype=np.float32) if unique else None
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
