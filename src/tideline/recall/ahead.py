"""Independent reads of one recall, run beside each other where that saves waiting.

On a database server every read is a round trip to another process; a recall's
vector search, its document-frequency count and its cluster-routing state do not
depend on each other, nor do the word and the substring searches. Where the store
says so (:meth:`~tideline.store.base.Store.parallel_reads`: a server, and the calling
thread inside no transaction) such a read is started at once in a worker thread,
on a connection of its own, and its result is collected where the recall needs it:
its round trip overlaps the caller's instead of following it. On SQLite, in process,
a read runs where its result is first needed, as if called there.

The full-text side of a recall (term statistics, word and substring searches) needs
no query vector: it runs in a worker (:func:`beside`) while the caller embeds the
query, which computes outside the interpreter's lock, so the two overlap in process
too. Not when the caller holds a write transaction: its reads must stay in its thread.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

__all__ = ["Later", "beside", "later"]

T = TypeVar("T")

_WORKERS = 4


class _Pool:
    """One process's worker pool of one purpose, made on first use and forgotten in a
    forked child (which has none of the parent's worker threads: the pool it inherited
    would queue reads that no thread ever runs)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=_WORKERS,
                                                thread_name_prefix=self._prefix)
            return self._pool

    def forget(self) -> None:
        self._lock = threading.Lock()
        self._pool = None


_reads = _Pool("tideline-recall")
#: The full-text sides' own workers (:func:`beside`).
_sides = _Pool("tideline-text-side")


def _forget_after_fork() -> None:
    _reads.forget()
    _sides.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class Later(Generic[T]):
    """A read's result, computed in a worker already or on the first :meth:`get`."""

    __slots__ = ("_call", "_done", "_future", "_value")

    def __init__(self, call: Callable[[], T], future: Future[T] | None) -> None:
        self._call = call
        self._future = future
        self._done = False
        self._value: T | None = None

    def get(self) -> T:
        """The result (the read's own exception, if it failed).

        Raises:
            Exception: whatever the read raised.
        """
        if self._future is not None:
            return self._future.result()
        if not self._done:
            self._value = self._call()
            self._done = True
        return self._value  # type: ignore[return-value]


def later(call: Callable[[], T], *, parallel: bool) -> Later[T]:
    """Start ``call`` in a worker thread when ``parallel``, else keep it for :meth:`Later.get`.

    Args:
        call: a read with no side effect on the caller's state.
        parallel: whether to run it beside the caller (the store's ``parallel_reads()``).

    Returns:
        Its pending result.
    """
    # The worker runs in a copy of the caller's context: what the call may read from
    # (tideline.store.routing: a standby for a read-only verb) follows it.
    return Later(call, _reads.get().submit(contextvars.copy_context().run, call)
                 if parallel else None)


def beside(call: Callable[[], T]) -> Later[T]:
    """Start ``call`` (the full-text side of a recall) in a worker thread on any store.

    The caller embeds the query meanwhile: the embedder computes outside the
    interpreter's lock (a native library, or an HTTP round trip), so the two overlap in
    process too. The workers are a pool of their own: ``call`` may wait on reads
    started with :func:`later`, which a shared pool could leave queued behind it.

    Args:
        call: reads and computations with no side effect on the caller's state.

    Returns:
        Its pending result.
    """
    return Later(call, _sides.get().submit(contextvars.copy_context().run, call))
