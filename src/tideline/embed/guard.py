"""Embedder faults degrade, never stop: the write and recall paths embed through a guard.

:class:`EmbedGuard` calls the embedder and turns any failure (an endpoint that is
down, a model that raises) into ``None``: recall then answers from full text and
the graph (the packet says ``degraded: "lexical"``), and writes are stored with
their vector pending until the embedder answers again (see
:mod:`tideline.store.pending`). After a failure the guard does not call the
embedder again for ``cooldown_s`` seconds, so a down endpoint costs one timeout
per cooldown, not one per call. Changes of state (down, up again) go to the
journal as ``embedder`` events through ``on_change``.

The ``none`` embedder (:class:`NoneEmbedder`) never makes a vector: such a store
is full-text only from the start, and the guard reports it as degraded without
journaling a fault.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tideline.embed.base import Embedder, ThresholdProfile, Vectors, format_marker
from tideline.errors import EmbedderError

__all__ = ["EmbedGuard", "NoneEmbedder"]

OnChange = Callable[[str, dict[str, Any]], None]


class NoneEmbedder:
    """The ``none`` embedder: no vectors at all, the store is full-text only.

    Its dimension (1) is nominal: no vector is ever stored. ``tideline reembed e5``
    (or any other embedder) gives the store vectors later.
    """

    name = "none"
    model = "full-text"
    dim = 1
    # Nothing is similar by meaning: the gate and recall rely on exact and lexical matches.
    profile = ThresholdProfile(same=1.0, related=1.0, abstain=1.0, floor=1.0)

    @property
    def marker(self) -> str:
        return format_marker(self.name, self.model, self.dim)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Always fails: this store keeps no vectors.

        Raises:
            EmbedderError: always.
        """
        raise EmbedderError("the 'none' embedder makes no vectors (full-text only store)")

    def embed_query(self, text: str) -> Vectors:
        """Always fails: this store keeps no vectors.

        Raises:
            EmbedderError: always.
        """
        raise EmbedderError("the 'none' embedder makes no vectors (full-text only store)")


class EmbedGuard:
    """Calls an embedder; a failure becomes ``None`` and a journaled state change.

    Args:
        embedder: the embedder to call.
        cooldown_s: after a failure, skip the embedder for this long.
        on_change: called with ``("down", {...})`` on the first failure and
            ``("up", {...})`` when it answers again.
    """

    def __init__(self, embedder: Embedder, *, cooldown_s: float = 30.0,
                 on_change: OnChange | None = None) -> None:
        self.embedder = embedder
        self.cooldown_s = cooldown_s
        self.on_change = on_change
        self.error: str | None = None
        self._down_until = 0.0
        self._down_since: float | None = None
        self._lock = threading.Lock()

    @property
    def full_text_only(self) -> bool:
        """The store was made without vectors (the ``none`` embedder)."""
        return self.embedder.name == "none"

    @property
    def down(self) -> bool:
        """The last call failed (or the embedder makes no vectors)."""
        return self.full_text_only or self._down_since is not None

    def passages(self, texts: Sequence[str]) -> Vectors | None:
        """Embed passages, or None when the embedder is unavailable."""
        return self._call("passages", lambda: self.embedder.embed_passages(texts))

    def query(self, text: str) -> Vectors | None:
        """Embed a query, or None when the embedder is unavailable."""
        return self._call("query", lambda: self.embedder.embed_query(text))

    def _call(self, what: str, body: Callable[[], Vectors]) -> Vectors | None:
        if self.full_text_only:
            return None
        now = time.monotonic()
        with self._lock:
            if now < self._down_until:
                return None
        try:
            out = body()
        except Exception as exc:  # any embedder fault degrades; none may stop a write
            self._failed(what, exc)
            return None
        self._answered()
        return out

    def _failed(self, what: str, exc: Exception) -> None:
        message = str(exc) if isinstance(exc, EmbedderError) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            first = self._down_since is None
            self.error = message[:300]
            self._down_until = time.monotonic() + self.cooldown_s
            if first:
                self._down_since = time.time()
        if first and self.on_change is not None:
            self.on_change("down", {"during": what, "error": self.error,
                                    "embedder": self.embedder.name})

    def _answered(self) -> None:
        with self._lock:
            since, self._down_since = self._down_since, None
            self.error = None
            self._down_until = 0.0
        if since is not None and self.on_change is not None:
            self.on_change("up", {"down_s": round(time.time() - since, 1),
                                  "embedder": self.embedder.name})
