"""psycopg errors → the typed tree, by SQLSTATE (the PostgreSQL side of
:mod:`tideline.store.sqlite.errors`)."""

from __future__ import annotations

import psycopg
from psycopg import errors as pg_errors

from tideline.errors import (
    BackendUnavailable,
    InputTooLarge,
    InvalidInput,
    StoreBusy,
    StoreError,
    StoreFull,
    TidelineError,
)

__all__ = ["from_psycopg"]

_BUSY_STATES = frozenset({"40001", "40P01", "55P03", "57014"})


def from_psycopg(exc: psycopg.Error) -> TidelineError:
    """Map a psycopg error to the typed tree by its SQLSTATE.

    Args:
        exc: the error raised by psycopg.

    Returns:
        The matching :class:`TidelineError`, with ``exc`` as its cause.
    """
    state = getattr(exc, "sqlstate", None) or ""
    text = " ".join(str(exc).split())  # one line: the CLI prints errors as one line
    mapped: TidelineError
    if state in _BUSY_STATES:
        mapped = StoreBusy(f"the database is busy ({state}): {text}")
    elif state in ("53100", "53200", "53400"):
        mapped = StoreFull(f"the database server is out of space or memory ({state}): {text}")
    elif state == "54000" or "too long" in text or "exceeds the maximum" in text:
        mapped = InputTooLarge(text)
    elif "NUL" in text and isinstance(exc, psycopg.DataError | pg_errors.UntranslatableCharacter
                                      | pg_errors.CharacterNotInRepertoire):
        mapped = InvalidInput("text must not contain NUL characters")
    elif state.startswith("22"):
        mapped = InvalidInput(f"the database refused a value ({state}): {text}")
    elif isinstance(exc, psycopg.OperationalError) and not state:
        mapped = BackendUnavailable(f"cannot reach the PostgreSQL server: {text}")
    else:
        mapped = StoreError(f"postgresql {state or 'error'}: {text}")
    mapped.__cause__ = exc
    return mapped
