"""The two in-memory representations behind a
:class:`~tideline.store.sqlite.vector_index.VectorIndex`.

* :class:`ExactStore`: a contiguous float32 matrix and a key array, searched exactly
  with a single-threaded matrix-vector product (faster than a graph below
  ``exact_below`` vectors, and exact);
* :class:`HnswStore`: a usearch HNSW graph (cosine metric, ``f16`` storage: measured
  to give the same recall as ``f32`` with ~1.5x faster search, ~2x faster construction
  and half the memory).

Both read themselves back from a saved payload (``from_buffer``) and raise
:class:`CorruptFile` when it does not validate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from usearch.index import Index as _UsearchIndex

from tideline.errors import InvalidInput

__all__ = ["HNSW_DTYPE", "CorruptFile", "ExactStore", "HnswStore", "IndexStore", "Keys",
           "Matrix", "as_keys", "as_matrix"]

# usearch ships only partial annotations; treat its index class as dynamic.
_Usearch: Any = _UsearchIndex

#: Storage type of the HNSW graph's vectors.
HNSW_DTYPE = "f16"

#: A key array (int64, one per vector) and a row-per-vector float32 matrix.
Keys = NDArray[np.int64]
Matrix = NDArray[np.float32]


class CorruptFile(Exception):
    """A saved file failed validation (internal; always handled by rebuilding)."""



def as_keys(keys: np.ndarray) -> Keys:
    """``keys`` as a flat contiguous int64 array."""
    return np.ascontiguousarray(keys, dtype=np.int64).reshape(-1)


def as_matrix(vectors: np.ndarray, dim: int, rows: int) -> Matrix:
    """``vectors`` as a contiguous float32 ``(rows, dim)`` matrix.

    Raises:
        InvalidInput: the source returned vectors of another shape.
    """
    mat = np.ascontiguousarray(vectors, dtype=np.float32)
    if mat.ndim == 1 and rows <= 1 and mat.size == dim * rows:
        mat = mat.reshape(rows, dim)
    if mat.ndim != 2 or mat.shape != (rows, dim):
        raise InvalidInput(
            f"source returned vectors of shape {tuple(mat.shape)}, expected ({rows}, {dim})"
        )
    return mat


def _dedupe_last(keys: Keys, vectors: Matrix) -> tuple[Keys, Matrix]:
    """Drop repeated keys, keeping the last occurrence of each."""
    if len(keys) < 2:
        return keys, vectors
    rev_unique, rev_index = np.unique(keys[::-1], return_index=True)
    if len(rev_unique) == len(keys):
        return keys, vectors
    keep = np.sort(len(keys) - 1 - rev_index)
    return keys[keep], vectors[keep]


def _top(sims: NDArray[np.float32], m: int) -> NDArray[np.intp]:
    """Indices of the ``m`` largest values, best first."""
    n = len(sims)
    if m >= n:
        return np.argsort(-sims, kind="stable")
    part = np.argpartition(sims, n - m)[n - m :]
    return part[np.argsort(-sims[part], kind="stable")]


class ExactStore:
    """A growable contiguous float32 matrix searched by brute force."""

    kind = "exact"

    def __init__(self, dim: int, capacity: int = 256) -> None:
        self.dim = dim
        self.keys: Keys = np.zeros(capacity, dtype=np.int64)
        self.mat: Matrix = np.zeros((capacity, dim), dtype=np.float32)
        self.n = 0
        self.pos: dict[int, int] = {}

    def __len__(self) -> int:
        return self.n

    def _reserve(self, extra: int) -> None:
        need = self.n + extra
        cap = len(self.keys)
        if need <= cap:
            return
        new_cap = max(need, cap * 2, 256)
        keys = np.zeros(new_cap, dtype=np.int64)
        mat = np.zeros((new_cap, self.dim), dtype=np.float32)
        keys[: self.n] = self.keys[: self.n]
        mat[: self.n] = self.mat[: self.n]
        self.keys, self.mat = keys, mat

    def add(self, keys: Keys, vectors: Matrix) -> None:
        keys, vectors = _dedupe_last(keys, vectors)
        if not len(keys):
            return
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        normed = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        self._reserve(len(keys))
        rows = np.empty(len(keys), dtype=np.intp)
        for i, key in enumerate(keys.tolist()):
            row = self.pos.get(key)
            if row is None:
                row = self.pos[key] = self.n
                self.n += 1
            rows[i] = row
        self.keys[rows] = keys
        self.mat[rows] = normed

    def remove(self, keys: Sequence[int]) -> None:
        for key in keys:
            row = self.pos.pop(key, None)
            if row is None:
                continue
            last = self.n - 1
            if row != last:
                moved = int(self.keys[last])
                self.keys[row] = moved
                self.mat[row] = self.mat[last]
                self.pos[moved] = row
            self.n = last

    def search(self, query: Matrix, m: int) -> tuple[Keys, NDArray[np.float32]]:
        if self.n == 0 or m <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        # einsum is a single-threaded SIMD loop: a BLAS gemv would wake a thread
        # pool per query, which costs milliseconds on a busy 2-core machine.
        sims = np.einsum("ij,j->i", self.mat[: self.n], query[0])
        order = _top(sims, m)
        return self.keys[order], sims[order]

    def sample(self, count: int, rng: np.random.Generator) -> Matrix:
        rows = np.arange(self.n) if self.n <= count else rng.choice(self.n, count, False)
        return self.mat[rows]

    def payload(self) -> Iterator[memoryview]:
        # Bytes through a flat uint8 view: memoryview.cast refuses an empty (n = 0) matrix.
        yield np.ascontiguousarray(self.keys[: self.n]).reshape(-1).view(np.uint8).data
        yield np.ascontiguousarray(self.mat[: self.n]).reshape(-1).view(np.uint8).data

    @classmethod
    def from_buffer(cls, buf: memoryview, dim: int, count: int) -> ExactStore:
        if len(buf) != count * 8 + count * dim * 4:
            raise CorruptFile("exact payload has the wrong length")
        store = cls(dim, capacity=max(count, 256))
        keys = np.frombuffer(buf, dtype=np.int64, count=count)
        mat = np.frombuffer(buf, dtype=np.float32, count=count * dim, offset=count * 8)
        store.keys[:count] = keys
        store.mat[:count] = mat.reshape(count, dim)
        store.n = count
        store.pos = {int(k): i for i, k in enumerate(keys.tolist())}
        if len(store.pos) != count:
            raise CorruptFile("exact payload has duplicate keys")
        return store


class HnswStore:
    """A usearch HNSW graph (cosine metric)."""

    kind = "hnsw"

    def __init__(self, index: Any) -> None:
        self.index = index

    @classmethod
    def create(
        cls, dim: int, connectivity: int, expansion_add: int, expansion_search: int
    ) -> HnswStore:
        return cls(
            _Usearch(
                ndim=dim,
                metric="cos",
                dtype=HNSW_DTYPE,
                connectivity=connectivity,
                expansion_add=expansion_add,
                expansion_search=expansion_search,
            )
        )

    def __len__(self) -> int:
        return int(len(self.index))

    def add(self, keys: Keys, vectors: Matrix) -> None:
        keys, vectors = _dedupe_last(keys, vectors)
        if not len(keys):
            return
        present = np.asarray(self.index.contains(keys), dtype=bool).reshape(-1)
        if present.any():
            self.index.remove(keys[present])
        threads = 0 if len(keys) >= 256 else 1
        self.index.add(keys, vectors, threads=threads)

    def remove(self, keys: Sequence[int]) -> None:
        if keys:
            self.index.remove(np.asarray(keys, dtype=np.int64))

    def exact_among(
        self, query: Matrix, allowed: Callable[[int], bool], k: int
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest allowed keys by an exact scan of their stored vectors."""
        keys = [key for key in np.asarray(self.index.keys, dtype=np.int64).tolist()
                if allowed(key)]
        if not keys:
            return []
        mat = np.stack(self.index.get(np.asarray(keys, dtype=np.int64), dtype=np.float32))
        norms = np.linalg.norm(mat, axis=1)
        sims = (mat @ query[0]) / np.where(norms > 0, norms, 1.0)
        order = np.argsort(-sims, kind="stable")[:k]
        return [(keys[i], float(sims[i])) for i in order.tolist()]

    def sample(self, count: int, rng: np.random.Generator) -> Matrix:
        keys = np.asarray(self.index.keys, dtype=np.int64)
        if len(keys) > count:
            keys = rng.choice(keys, count, replace=False)
        if not len(keys):
            return np.zeros((0, self.index.ndim), dtype=np.float32)
        return np.stack(self.index.get(keys, dtype=np.float32)).astype(np.float32)

    def search(self, query: Matrix, m: int) -> tuple[Keys, NDArray[np.float32]]:
        if len(self.index) == 0 or m <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        found = self.index.search(query[0], m, threads=1)
        keys = np.asarray(found.keys).astype(np.int64)
        sims = (1.0 - np.asarray(found.distances, dtype=np.float32)).astype(np.float32)
        return keys, sims

    @classmethod
    def from_buffer(
        cls, buf: memoryview, header: dict[str, Any], expansion_add: int, expansion_search: int
    ) -> HnswStore:
        index = _Usearch(
            ndim=header["dim"],
            metric="cos",
            dtype=str(header.get("dtype", HNSW_DTYPE)),
            connectivity=int(header.get("connectivity", 16)),
        )
        try:
            index.load(buf)
        except Exception as exc:  # usearch raises RuntimeError/ValueError on bad bytes
            raise CorruptFile(f"usearch could not load the payload: {exc}") from exc
        if int(index.ndim) != header["dim"] or len(index) != header["count"]:
            raise CorruptFile("usearch payload disagrees with its header")
        index.expansion_add = expansion_add
        index.expansion_search = expansion_search
        return cls(index)


#: Either in-memory representation.
IndexStore = ExactStore | HnswStore
