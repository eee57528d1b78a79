"""A text-keyed passage-vector cache for benchmarks: ``--embed-cache DIR``.

Embedding a LongMemEval history (~490 turns, many long) takes minutes on two cores;
the vectors never change for the same text and model. A cache directory holds
``*.npz`` files, each with ``keys`` (the sha1 hex digest, as bytes, of the UTF-8 text
exactly as passed to ``embed_passages``) and ``vecs`` (float32, one row per key).
:class:`CachedEmbedder` wraps an embedder: every passage text found in the cache takes
its vector from there, every other one is embedded by the wrapped embedder (and, when
a directory is writable, saved in a new file on :meth:`CachedEmbedder.save`). Several
directories are layers: all are read, the misses are written to the last writable one
(a read-only shared cache first, a writable one of the caller's after it, so vectors
it lacks, such as passage vectors, are embedded once).
Queries are never cached: the bench measures their latency.

The cache is keyed by text only, so it must hold vectors of the wrapped embedder's
model (the files carry no marker; the directory is the caller's choice). A cached
vector is bit-identical to the embedder's own when the embedder embeds each text
independently of its batch, as e5 does.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tideline.embed.base import Embedder, ThresholdProfile, Vectors, check_texts

__all__ = ["CachedEmbedder", "text_key"]


def text_key(text: str) -> bytes:
    """The cache key of a passage text: its UTF-8 sha1, hex, as bytes."""
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest().encode()


class CachedEmbedder:
    """An :class:`~tideline.embed.base.Embedder` reading passage vectors from a cache dir.

    Args:
        inner: the embedder that embeds misses and every query.
        directory: the cache directory (``*.npz`` read at construction; may not exist).
        more: further directories, read too; :meth:`save` writes to the last writable
            one of all.
    """

    def __init__(self, inner: Embedder, directory: str | Path, *more: str | Path) -> None:
        self.inner = inner
        self.directories = [Path(directory), *(Path(d) for d in more)]
        self.directory = self.directories[0]
        self._vectors: dict[bytes, np.ndarray] = {}
        self._new: dict[bytes, np.ndarray] = {}
        self.hits = 0
        self.misses = 0
        for path in [p for d in self.directories if d.is_dir() for p in sorted(d.glob("*.npz"))]:
            with np.load(path) as data:
                keys, vecs = data["keys"], data["vecs"]
                if vecs.ndim != 2 or len(keys) != len(vecs):
                    continue  # not a cache file of this layout
                if vecs.shape[1] != inner.dim:
                    continue  # another model's vectors
                for key, vec in zip(keys, vecs, strict=True):
                    self._vectors[bytes(key)] = np.asarray(vec, dtype=np.float32)

    @property
    def name(self) -> str:
        """The wrapped embedder's family."""
        return self.inner.name

    @property
    def model(self) -> str:
        """The wrapped embedder's model id."""
        return self.inner.model

    @property
    def dim(self) -> int:
        """The wrapped embedder's dimension."""
        return self.inner.dim

    @property
    def profile(self) -> ThresholdProfile:
        """The wrapped embedder's thresholds."""
        return self.inner.profile

    @property
    def marker(self) -> str:
        """The wrapped embedder's marker (a store sees the same embedder)."""
        return self.inner.marker

    def __len__(self) -> int:
        return len(self._vectors)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Vectors of ``texts``: cached ones from the cache, the others embedded.

        Raises:
            InvalidInput: ``texts`` is not a sequence of strings.
            EmbedderError: the wrapped embedder failed on a miss.
        """
        clean = check_texts(texts)
        keys = [text_key(t) for t in clean]
        missing = list(dict.fromkeys(t for t, k in zip(clean, keys, strict=True)
                                     if k not in self._vectors))
        if missing:
            got = self.inner.embed_passages(missing)
            for text, vec in zip(missing, got, strict=True):
                key = text_key(text)
                self._vectors[key] = self._new[key] = np.asarray(vec, dtype=np.float32)
        self.misses += len(missing)
        self.hits += len(clean) - len(missing)
        if not clean:
            return np.zeros((0, self.dim), dtype=np.float32)
        out: Vectors = np.stack([self._vectors[k] for k in keys]).astype(np.float32)
        return out

    def embed_query(self, text: str) -> Vectors:
        """The wrapped embedder's query vector (never cached).

        Raises:
            EmbedderError: the wrapped embedder failed.
        """
        return self.inner.embed_query(text)

    def save(self) -> Path | None:
        """Write the vectors embedded since the last save to a new file of the last
        writable directory.

        Returns:
            The file written, or None when nothing is new or no directory is writable
            (a read-only shared cache is only read).
        """
        if not self._new:
            return None
        for directory in reversed(self.directories):
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError:
                continue
            if os.access(directory, os.W_OK):
                break
        else:
            return None
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{len(self._new)}.npz"
        path = directory / name
        keys = np.array(list(self._new), dtype="S40")
        np.savez(path, keys=keys, vecs=np.stack(list(self._new.values())).astype(np.float32))
        self._new.clear()
        return path
