"""Vector math both backends' indexes share (numpy only, no store, no recall).

The SQLite backend's usearch index (:mod:`tideline.store.sqlite.vector_index`) and
PostgreSQL's pgvector search (:mod:`tideline.store.postgres.vectors`) describe a
space by the same centroid, so that the hubness discount of a recall is the same on
either backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["centroid_of"]


def centroid_of(vecs: NDArray[np.floating[Any]]) -> tuple[NDArray[np.float32], float] | None:
    """The unit mean direction of some vectors and their mean cosine to it.

    Args:
        vecs: a sample of a space's vectors, one per row (any lengths).

    Returns:
        ``(unit centroid, mean cosine of the unit rows to it)``, or None when the rows
        cancel out (or there are none).
    """
    if not len(vecs):
        return None
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    unit_rows = (vecs / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    mean = unit_rows.mean(axis=0)
    length = float(np.linalg.norm(mean))
    if length == 0.0:
        return None
    unit = (mean / length).astype(np.float32)
    return unit, float((unit_rows @ unit).mean())
