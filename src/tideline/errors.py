"""Typed errors raised by Tideline.

Every failure a caller can act on has its own class. The tree::

    TidelineError
    ├── InvalidInput            bad value: NUL, lone surrogate, weight outside 1–5, …
    │   ├── InputTooLarge       a field, batch or result over its size cap
    │   ├── ArchiveInvalid      an export archive that is malformed, truncated or tampered
    │   └── UnsafePath          a target path through a symlink, or outside its root
    ├── NotFound                no memory / turn / store with that id
    ├── Conflict                a version check failed (someone wrote meanwhile)
    ├── StoreError              the database itself
    │   ├── StoreBusy           still locked after the bounded retries
    │   │   └── PrimaryUnavailable  no primary to write to (a failover); retry soon
    │   ├── StoreFull           disk or quota full
    │   ├── StoreCorrupt        integrity check failed / not a database
    │   ├── SchemaTooNew        written by a newer Tideline
    │   └── BackendUnavailable  a database URL whose backend this Tideline lacks
    ├── EmbedderMismatch        store was built with another embedder
    └── EmbedderError           the embedder failed (model, HTTP endpoint)

Each class carries an ``exit_code`` so that the CLI maps errors to distinct
process exit codes (2 stays click's usage error), a ``code`` string that other
surfaces (MCP) reuse, and the ``jsonrpc_code`` that MCP puts beside it. A new
subclass declares all three next to each other, so no surface can miss it.
"""

from __future__ import annotations

__all__ = [
    "ArchiveInvalid",
    "BackendUnavailable",
    "Conflict",
    "EmbedderError",
    "EmbedderMismatch",
    "InputTooLarge",
    "InvalidInput",
    "NotFound",
    "PrimaryUnavailable",
    "SchemaTooNew",
    "StoreBusy",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "TidelineError",
    "UnsafePath",
]


class TidelineError(Exception):
    """Base class of every error Tideline raises on purpose."""

    code = "tideline_error"
    exit_code = 1
    jsonrpc_code = -32015
    #: Whether the same call may succeed if made again a little later (nothing was
    #: written, or an idempotency key makes the repeat safe).
    retryable = False


class InvalidInput(TidelineError, ValueError):
    """A value was rejected before anything was written."""

    code = "invalid_input"
    exit_code = 3
    jsonrpc_code = -32602


class InputTooLarge(InvalidInput):
    """A field, batch or requested result exceeds its configured cap."""

    code = "input_too_large"
    exit_code = 4
    jsonrpc_code = -32602


class ArchiveInvalid(InvalidInput):
    """An export archive is malformed, of an unknown format version, truncated or tampered.

    Nothing is written when an archive is refused.
    """

    code = "archive_invalid"
    exit_code = 7
    jsonrpc_code = -32602


class UnsafePath(InvalidInput):
    """A target path runs through a symlink or would leave its root; nothing is written."""

    code = "unsafe_path"
    exit_code = 8
    jsonrpc_code = -32602


class NotFound(TidelineError, LookupError):
    """The referenced memory, turn or store does not exist."""

    code = "not_found"
    exit_code = 5
    jsonrpc_code = -32602


class Conflict(TidelineError):
    """An optimistic version check failed; the caller should re-read."""

    code = "conflict"
    exit_code = 6
    jsonrpc_code = -32010


class StoreError(TidelineError):
    """The database failed in a way not covered by a narrower class."""

    code = "store_error"
    exit_code = 10
    jsonrpc_code = -32015


class StoreBusy(StoreError):
    """The database stayed locked past the busy timeout and retries."""

    code = "store_busy"
    exit_code = 11
    jsonrpc_code = -32011
    retryable = True


class PrimaryUnavailable(StoreBusy):
    """No PostgreSQL primary answers right now (it died, a standby is being promoted,
    or the URL reaches only standbys); nothing was written by the failed call.

    Retry after a short wait: the pool reconnects to the new primary on its own, and
    an idempotency key makes the repeated write safe. Reads keep answering from a
    standby meanwhile, marked read-only.
    """

    code = "primary_unavailable"
    exit_code = 17
    jsonrpc_code = -32018


class StoreFull(StoreError):
    """The disk (or a configured quota) is full; nothing was written."""

    code = "store_full"
    exit_code = 12
    jsonrpc_code = -32012


class StoreCorrupt(StoreError):
    """The file is not a database or failed an integrity check."""

    code = "store_corrupt"
    exit_code = 13
    jsonrpc_code = -32013


class SchemaTooNew(StoreError):
    """The store was written by a newer Tideline schema than this one knows."""

    code = "schema_too_new"
    exit_code = 14
    jsonrpc_code = -32014


class BackendUnavailable(StoreError):
    """A database URL names a backend this Tideline cannot use (yet)."""

    code = "backend_unavailable"
    exit_code = 15
    jsonrpc_code = -32016


class StoreClosed(StoreError):
    """The ``Memory`` was closed; open the store again to use it."""

    code = "store_closed"
    exit_code = 16
    jsonrpc_code = -32017


class EmbedderMismatch(TidelineError):
    """The store's vectors were made by another embedder.

    Attributes:
        stored: the marker recorded in the store (``model/dim``).
        requested: the marker of the embedder that tried to open it.
    """

    code = "embedder_mismatch"
    exit_code = 20
    jsonrpc_code = -32020

    def __init__(self, stored: str, requested: str) -> None:
        super().__init__(
            f"store was built with embedder {stored!r} but {requested!r} was requested; "
            f"open it with {stored!r} or run `tideline reembed`"
        )
        self.stored = stored
        self.requested = requested


class EmbedderError(TidelineError):
    """The embedding model or endpoint failed."""

    code = "embedder_error"
    exit_code = 21
    jsonrpc_code = -32021
