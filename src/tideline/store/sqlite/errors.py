"""SQLite's errors in Tideline's typed tree (next to the driver, as every backend maps its own)."""

from __future__ import annotations

import sqlite3

from tideline.errors import (
    InputTooLarge,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    TidelineError,
)

__all__ = ["from_sqlite"]


def from_sqlite(exc: sqlite3.Error) -> TidelineError:
    """Map a driver error to the typed tree by its SQLite error name.

    Args:
        exc: the error raised by :mod:`sqlite3`.

    Returns:
        The matching :class:`TidelineError`, with ``exc`` as its cause.
    """
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = str(exc)
    mapped: TidelineError
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in text:
        mapped = StoreBusy(text)
    elif name.startswith("SQLITE_FULL") or "disk is full" in text:
        mapped = StoreFull(text)
    elif name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "not a database" in text:
        mapped = StoreCorrupt(text)
    elif name.startswith("SQLITE_TOOBIG"):
        mapped = InputTooLarge(text)
    else:
        mapped = StoreError(f"{name or 'sqlite error'}: {text}")
    mapped.__cause__ = exc
    return mapped
