"""Portable SQL text helpers every store module may use (no imports of the store).

The ``IN (…)`` lists of the shared views and of both backends are built here, so a
module that needs one depends on nothing else of the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["padded", "placeholders"]

T = TypeVar("T")

#: The shortest padded ``IN (…)`` list (see :func:`padded`).
_PAD_LEAST = 8


def placeholders(n: int) -> str:
    """``?,?,…`` for an ``IN (…)`` list of ``n`` values."""
    return ",".join("?" * n)


def padded(values: Sequence[T], most: int) -> list[T]:
    """``values`` with the last one repeated up to the next power of two (at least 8,
    at most ``most`` or their own number), for an ``IN (…)`` list.

    Each length of such a list is a statement text of its own, and a connection keeps
    only so many prepared (Python's sqlite3: 128): a recall's id lists of every length
    from 1 to hundreds made it prepare its largest statements anew nearly every time.
    Padded, a statement has a handful of texts. A repeated value changes nothing an
    ``IN`` list selects.

    Args:
        values: the list's values.
        most: the longest list the caller sends (its chunk).

    Returns:
        The padded values (``values`` as a list when empty or already long enough).
    """
    out = list(values)
    if not out:
        return out
    size = _PAD_LEAST
    while size < len(out):
        size *= 2
    return out + [out[-1]] * (max(min(size, most), len(out)) - len(out))
