"""The embedder protocol, threshold profiles and shared helpers.

An embedder turns text into L2-normalised ``float32`` vectors. Passages (what
is stored) and queries (what recall asks) may be embedded differently
(asymmetric models such as e5), so the protocol has one method for each.

Every embedder has a *marker*, ``"{name}:{model}/{dim}"``, which the store
records; a store refuses to open with an embedder whose marker differs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from tideline.errors import EmbedderError, InvalidInput

__all__ = [
    "Embedder",
    "ThresholdProfile",
    "Vectors",
    "check_texts",
    "clean_text",
    "format_marker",
    "l2_normalize",
    "parse_marker",
]

#: A batch of embeddings: float32, one row per text.
Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ThresholdProfile:
    """Cosine thresholds that depend on the embedder's similarity scale.

    Attributes:
        same: cosine at or above which the novelty gate treats a new text as
            the same memory (and potentiates it instead of writing a new one).
        related: ``related <= cosine < same`` writes a new memory plus a
            ``related`` edge.
        abstain: recall abstains when the best vector similarity is below
            this and there is no lexical hit.
        floor: cosine below which a vector candidate is ignored entirely.
        margin: recall also trusts a best hit that stands this many standard
            deviations above the query's background of candidates (useful for
            anisotropic models, where every cosine is high).
    """

    same: float
    related: float
    abstain: float
    floor: float
    margin: float = 3.0

    def __post_init__(self) -> None:
        values = (self.same, self.related, self.abstain, self.floor)
        if not all(-1.0 <= v <= 1.0 for v in values):
            raise InvalidInput(f"threshold profile values must lie in [-1, 1]: {values}")
        if not self.same >= self.related:
            raise InvalidInput(f"threshold profile needs same >= related: {values}")
        if not self.abstain >= self.floor:
            raise InvalidInput(f"threshold profile needs abstain >= floor: {values}")


@runtime_checkable
class Embedder(Protocol):
    """What the store, the write path and recall need from an embedder.

    ``name``, ``model``, ``dim`` and ``profile`` are read-only here, so that a
    plain attribute or a (lazy) property both satisfy the protocol.
    """

    @property
    def name(self) -> str:
        """Family: ``"hashing"``, ``"e5"`` or ``"http"``."""
        ...

    @property
    def model(self) -> str:
        """Model id, e.g. ``"hashing-v1"`` or ``"multilingual-e5-small-q4"``."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimensionality."""
        ...

    @property
    def profile(self) -> ThresholdProfile:
        """Thresholds calibrated for this embedder's similarity scale."""
        ...

    @property
    def marker(self) -> str:
        """``f"{name}:{model}/{dim}"``, recorded in the store."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Embed texts to be stored: ``(n, dim)`` float32, rows L2-normalised."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Embed a recall query: ``(dim,)`` float32, L2-normalised."""
        ...


_MARKER_RE = re.compile(r"^(?P<name>[a-z0-9_-]+):(?P<model>.+)/(?P<dim>[1-9][0-9]{0,5})$")


def format_marker(name: str, model: str, dim: int) -> str:
    """Build the marker string ``"{name}:{model}/{dim}"``."""
    return f"{name}:{model}/{dim}"


def parse_marker(marker: str) -> tuple[str, str, int]:
    """Split a marker into ``(name, model, dim)``.

    The model may itself contain ``/`` or ``:`` (``"BAAI/bge-m3"``,
    ``"nomic-embed-text:latest"``): the name ends at the first ``:`` and the
    dim starts after the last ``/``.

    Raises:
        InvalidInput: the string is not a marker.
    """
    m = _MARKER_RE.match(marker) if isinstance(marker, str) else None
    if m is None:
        raise InvalidInput(f"not an embedder marker (expected 'name:model/dim'): {marker!r}")
    return m["name"], m["model"], int(m["dim"])


def clean_text(text: str) -> str:
    """Make ``text`` safe to encode as UTF-8 and to pass through C APIs.

    NUL characters become spaces and lone surrogates become U+FFFD. Callers
    validate input earlier; this only guarantees the embedder never crashes.

    Raises:
        InvalidInput: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise InvalidInput(f"text to embed must be str, got {type(text).__name__}")
    if "\x00" in text:
        text = text.replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def check_texts(texts: Sequence[str]) -> list[str]:
    """Validate a batch argument (a sequence of ``str``, not a bare ``str``)."""
    if isinstance(texts, str | bytes):
        raise InvalidInput("embed_passages expects a sequence of strings, not a single string")
    return [clean_text(t) for t in texts]


def l2_normalize(vectors: npt.ArrayLike, *, what: str = "embedder") -> Vectors:
    """Return ``vectors`` as float32 with each row scaled to unit length.

    Raises:
        EmbedderError: a value is not finite or a row has zero length.
    """
    arr = np.asarray(vectors, dtype=np.float32)
    if not np.all(np.isfinite(arr)):
        raise EmbedderError(f"{what} returned non-finite values")
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    if np.any(norms <= 1e-12):
        raise EmbedderError(f"{what} returned a zero vector")
    out: Vectors = (arr / norms).astype(np.float32, copy=False)
    return out
