"""A new store whose http embedder has never answered: written full-text, vectors pending.

The http embedder learns its dimension from the endpoint's first answer, and a store
records its embedder's marker (``http:<model>/<dim>``) when it is created. On
``ed15f9c`` a new store whose endpoint was down could therefore not be created at all
(``tideline remember`` exited 21), while a store that had once reached it degraded to
full text. Now such a store is created under a provisional marker
(``http-pending:<model>/1``): every write is stored (full text, its vector pending,
the gate's near-duplicate check waiting like any degraded write) and recall answers
from full text. The first open that reaches the endpoint fixes the marker to the real
``http:<model>/<dim>`` (:func:`fix_marker`), and the pending vectors are filled as for
any store whose embedder came back (the next write or sleep).

Within one process the dimension stays what the process opened with: a long-running
server that opened before the endpoint answered stays full-text until it is restarted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tideline.embed.base import ThresholdProfile, Vectors, format_marker, parse_marker
from tideline.errors import EmbedderError

if TYPE_CHECKING:
    from tideline.embed.http import HttpEmbedder

__all__ = ["PENDING", "PendingHttpEmbedder", "fix_marker", "settle"]

#: The marker family of a store whose http endpoint has not answered yet.
PENDING = "http-pending"


class PendingHttpEmbedder:
    """The http embedder of a store whose endpoint has never answered.

    Its dimension (1) is nominal, like the ``none`` embedder's: no vector is made until
    a later open reaches the endpoint and fixes the store's marker.
    """

    name = PENDING
    dim = 1

    def __init__(self, inner: HttpEmbedder) -> None:
        self.inner = inner
        self.model = inner.model
        self.profile: ThresholdProfile = inner.profile

    @property
    def marker(self) -> str:
        """``http-pending:<model>/1``."""
        return format_marker(PENDING, self.model, self.dim)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Always fails: the endpoint has not answered, so the dimension is unknown.

        Raises:
            EmbedderError: always (the write path keeps the vector pending).
        """
        raise EmbedderError(self._why())

    def embed_query(self, text: str) -> Vectors:
        """Always fails (recall answers from full text).

        Raises:
            EmbedderError: always.
        """
        raise EmbedderError(self._why())

    def _why(self) -> str:
        return (f"the embedding endpoint has not answered yet (model {self.model!r}): "
                "vectors are pending until an open reaches it")


def settle(embedder: object, stored: str | None) -> object:
    """The embedder a store is opened with when it is the http one.

    A store that already has an ``http:<model>/<dim>`` marker for this model takes the
    dimension from it (no request); otherwise the endpoint is asked once, and if it does
    not answer the store is opened (or created) provisionally with
    :class:`PendingHttpEmbedder`. Any other embedder is returned as is.
    """
    from tideline.embed.http import HttpEmbedder

    if not isinstance(embedder, HttpEmbedder) or embedder._dim is not None:
        return embedder
    if stored is not None:
        try:
            family, model, dim = parse_marker(stored)
        except Exception:  # a damaged marker: the store's own check reports it
            return embedder
        if family == "http" and model == embedder.model:
            embedder._dim = dim
            return embedder
    try:
        embedder.dim  # noqa: B018  # the probe: one request for the dimension
    except EmbedderError:
        if stored is None or stored.startswith(PENDING + ":"):
            return PendingHttpEmbedder(embedder)
        raise
    return embedder


def fix_marker(stored: str, marker: str) -> bool:
    """Whether a provisional marker may be replaced by ``marker`` (same model, now known)."""
    if not stored.startswith(PENDING + ":"):
        return False
    try:
        _, old_model, _ = parse_marker(stored)
        family, model, _ = parse_marker(marker)
    except Exception:
        return False
    return family == "http" and model == old_model
