"""Which reads may be answered by a standby: a flag the facade sets around a read-only verb.

Recall, the session brief, ``read_context``, ``show`` and the report read and never
decide a write from what they read, so a PostgreSQL store with a read route
(``TIDELINE_DATABASE_READ_URL``, or ``target_session_attrs=prefer-standby``) may send
their reads to a hot standby. Everything else (writes, and the reads a write, sleep or
dream decides from) stays on the primary. The flag is a context variable: it follows
the call into the recall's read-ahead threads (which copy the context), and costs
nothing on SQLite, which ignores it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["reads_standby", "standby_ok", "standby_reads"]

_STANDBY_OK: ContextVar[bool] = ContextVar("tideline_standby_ok", default=False)


@contextlib.contextmanager
def standby_reads() -> Iterator[None]:
    """Inside it, reads outside a write transaction may go to a standby."""
    token = _STANDBY_OK.set(True)
    try:
        yield
    finally:
        _STANDBY_OK.reset(token)


def standby_ok() -> bool:
    """Whether the current call allows its reads to go to a standby."""
    return _STANDBY_OK.get()


def reads_standby(verb: Callable[P, R]) -> Callable[P, R]:
    """Mark a read-only verb: its reads may go to a standby (see :func:`standby_reads`)."""

    @functools.wraps(verb)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with standby_reads():
            return verb(*args, **kwargs)

    return wrapper
