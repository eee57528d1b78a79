"""One derived ANN index per vector space, kept in step with the store.

A space is one kind of row (``m`` memories, ``t`` raw turns) in one scope of one
namespace, so that scope isolation is structural: a recall in project A only
ever searches the indexes of A and ``global``.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from tideline.store.sqlite.vector_index import VectorIndex, VectorSource

__all__ = ["SpaceHost", "VectorSpaces"]


class SpaceHost(Protocol):
    """What the vector spaces need from their store (the SQLite store is one)."""

    @property
    def directory(self) -> Path:
        """The store directory (the index files go to its ``index/``)."""

    def space(self, kind: str, scope: str) -> str:
        """Name of the vector space of one kind (``m``/``t``) in one scope."""

    def source(self, kind: str, scope: str, dim: int) -> VectorSource:
        """The rows of one space, as the index replays them."""

    def scopes(self) -> list[str]:
        """Every scope that holds memories or turns."""


def _file_name(space: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9_-]+", "_", space)[:40]
    digest = hashlib.sha1(space.encode("utf-8"), usedforsecurity=False).hexdigest()[:12]
    return f"{readable}-{digest}"


class VectorSpaces:
    """Lazily opened :class:`VectorIndex` objects, one per space.

    Args:
        store: the store whose ``vectors`` table is the source of truth.
        dim: vector dimension.
        marker: the embedder marker; an index file built for another marker is rebuilt.
    """

    def __init__(self, store: SpaceHost, dim: int, marker: str) -> None:
        self.store = store
        self.dim = dim
        self.marker = marker
        self.directory: Path = store.directory / "index"
        self._indexes: dict[str, VectorIndex] = {}
        self._lock = threading.Lock()

    def index(self, kind: str, scope: str) -> VectorIndex:
        """The synced index of one space."""
        space = self.store.space(kind, scope)
        with self._lock:
            idx = self._indexes.get(space)
            if idx is None:
                self.directory.mkdir(parents=True, exist_ok=True)
                idx = VectorIndex(self.directory, _file_name(space), self.dim, self.marker)
                self._indexes[space] = idx
        idx.sync(self.store.source(kind, scope, self.dim))
        return idx

    def search(
        self, kind: str, scopes: Sequence[str], query: np.ndarray, k: int
    ) -> dict[int, float]:
        """Top-``k`` keys per scope merged: ``{key: cosine}``."""
        hits: dict[int, float] = {}
        for scope in dict.fromkeys(scopes):
            for key, sim in self.index(kind, scope).search(query, k):
                hits[int(key)] = float(sim)
        return hits

    def centroid(self, kind: str, scope: str) -> tuple[np.ndarray, float] | None:
        """The centroid of a space (see :meth:`VectorIndex.centroid`).

        Uses the index as last synced (a search in the same recall just did that)
        instead of asking the database again; opens and syncs it only the first time.
        """
        with self._lock:
            idx = self._indexes.get(self.store.space(kind, scope))
        return (idx if idx is not None else self.index(kind, scope)).centroid()

    def _every(self) -> Iterator[tuple[str, str, VectorIndex]]:
        """``(kind, scope, index)`` of every space, each opened and synced."""
        for scope in self.store.scopes():
            for kind in ("m", "t"):
                yield kind, scope, self.index(kind, scope)

    def rebuild_all(self) -> dict[str, int]:
        """Rebuild every space's index from the database; returns sizes by space."""
        sizes: dict[str, int] = {}
        for kind, scope, idx in self._every():
            idx.rebuild(self.store.source(kind, scope, self.dim))
            idx.save()
            sizes[self.store.space(kind, scope)] = len(idx)
        return sizes

    def build_all(self) -> dict[str, int]:
        """Bring every space's index up to date (incrementally from a saved file where
        one exists, else built) and save it, so a new process loads it; returns sizes."""
        sizes: dict[str, int] = {}
        for kind, scope, idx in self._every():
            idx.save(force=False)  # a rebuild during the sync has saved it already
            sizes[self.store.space(kind, scope)] = len(idx)
        return sizes

    def warm(self) -> dict[str, int]:
        """Open and sync every space's index (a new host's first search would build or
        load it); returns the vectors per space."""
        return {self.store.space(kind, scope): len(idx) for kind, scope, idx in self._every()}

    def close(self) -> None:
        """Persist what changed and drop the in-memory indexes."""
        with self._lock:
            for idx in self._indexes.values():
                idx.close()
            self._indexes.clear()
