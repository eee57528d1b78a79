"""The advisory lock classes every host of one database agrees on, and their keys.

A lock is ``pg_advisory_xact_lock(class, key)`` (or the session form for sleep): the
class says what is locked, the key (:func:`advisory_key`) which one.
"""

from __future__ import annotations

import zlib

__all__ = ["LOCK_ANALYZE", "LOCK_DDL", "LOCK_KEY", "LOCK_MIGRATE", "LOCK_SESSION",
           "LOCK_SLEEP", "advisory_key"]

LOCK_MIGRATE = 7101  # one host migrates the schema, the others wait and find it done
LOCK_KEY = 7102  # an idempotency key, until its write commits
LOCK_SESSION = 7103  # a session's next turn index, until the turn is written
LOCK_SLEEP = 7104  # a namespace's sleep (a session lock: gone with its connection)
LOCK_DDL = 7105  # creating a dimension's vector index
LOCK_ANALYZE = 7106  # one host analyses the vectors table at a time


def advisory_key(*parts: str) -> int:
    """A signed 32-bit key for ``pg_advisory_lock(class, key)`` from text parts."""
    digest = zlib.crc32("\x1f".join(parts).encode("utf-8", "surrogatepass"))
    return digest - (1 << 32) if digest >= (1 << 31) else digest
