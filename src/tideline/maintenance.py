"""Keeping a store sound: the doctor's checks and repairs, and re-embedding it.

The facade's ``doctor`` and ``reembed`` answer from here. Both leave the rows alone:
the doctor rebuilds only what is derived (full-text rows, missing vectors, index
files), and a re-embedding computes every new vector outside any transaction and
swaps them in at once, so the store stays usable with the old embedder until then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tideline.embed import Embedder, make_embedder
from tideline.errors import InvalidInput
from tideline.runtime import Runtime
from tideline.write.validate import clean_callback, clean_flag

__all__ = ["doctor", "reembed"]

Progress = Callable[[int, int], None]


def doctor(rt: Runtime, *, repair: bool = False,
           progress: Progress | None = None) -> dict[str, Any]:
    """Check the store and, with ``repair``, rebuild its derived data (see
    :meth:`tideline.Memory.doctor`).

    Raises:
        InvalidInput: ``repair`` is not a flag or ``progress`` not callable.
    """
    clean_callback(progress)
    return rt.store.doctor(rt.embedder, rt.vectors, repair=clean_flag(repair, "repair"),
                           progress=progress)


def reembed(rt: Runtime, embedder: str | Embedder, *, progress: Progress | None = None,
            url: str | None = None, model: str | None = None) -> tuple[dict[str, Any], Runtime]:
    """Re-embed ``rt``'s store with another embedder and switch the store to it.

    Returns:
        The counts and markers, and the runtime to use from now on: the same store
        and settings with the new embedder's parts (``rt``'s vector spaces are closed).

    Raises:
        InvalidInput: ``embedder`` is neither a name nor an embedder.
        EmbedderError: the new embedder failed (the store is unchanged).
    """
    if not isinstance(embedder, str | Embedder):
        raise InvalidInput("embedder must be an embedder name or instance")
    clean_callback(progress)
    new = make_embedder(embedder, url=url, model=model) if isinstance(embedder, str) \
        else embedder
    result = rt.store.reembed(new, progress=progress)
    rt.vectors.close()
    rt.store.marker = new.marker
    return result, Runtime.build(rt.config, new, store=rt.store, project=rt.project)
