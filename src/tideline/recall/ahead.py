"""Independent reads of one recall, run beside each other where that saves waiting.

On a database server every read is a round trip to another process; a recall's
vector search, its document-frequency count and its cluster-routing state do not
depend on each other, nor do the word and the substring searches. Where the store
says so (:meth:`~tideline.store.base.Store.parallel_reads`: a server, and the calling
thread inside no transaction) such a read is started at once in a worker thread,
on a connection of its own, and its result is collected where the recall needs it:
its round trip overlaps the caller's instead of following it. On SQLite, in process,
a read runs where its result is first needed, as if called there.

The query's embedding is the one call that runs beside the recall on every store
(:func:`beside`): it computes outside the interpreter's lock, and the full-text side
of the recall needs none of it, so the two overlap even in process. The store's reads
stay in the calling thread (a recall inside a write transaction reads through it).
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
_pool: ThreadPoolExecutor | None = None
#: The query embeddings' own workers: an embedding takes tens of milliseconds, and in
#: the reads' pool it would hold up the short reads of recalls running beside it.
_embed_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_after_fork() -> None:
    # A forked child has none of the parent's worker threads; the pool it inherited
    # would queue reads that no thread ever runs.
    global _pool, _embed_pool, _pool_lock  # noqa: PLW0603
    _pool = None
    _embed_pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _executor() -> ThreadPoolExecutor:
    global _pool  # noqa: PLW0603 - one pool per process, made on first use
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=_WORKERS,
                                       thread_name_prefix="tideline-recall")
        return _pool


def _embed_executor() -> ThreadPoolExecutor:
    global _embed_pool  # noqa: PLW0603 - one pool per process, made on first use
    with _pool_lock:
        if _embed_pool is None:
            _embed_pool = ThreadPoolExecutor(max_workers=_WORKERS,
                                             thread_name_prefix="tideline-embed")
        return _embed_pool


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
    return Later(call, _executor().submit(contextvars.copy_context().run, call)
                 if parallel else None)


def beside(call: Callable[[], T]) -> Later[T]:
    """Start ``call`` (a query embedding) in a worker thread on any store.

    The embedder computes outside the interpreter's lock (a native library, or an
    HTTP round trip), so the recall's full-text side, which needs no vector, runs in
    the caller meanwhile, on SQLite too.

    Args:
        call: an embedding with no side effect on the caller's state.

    Returns:
        Its pending result.
    """
    started = threading.Event()

    def run() -> T:
        started.set()
        return call()

    future = _embed_executor().submit(contextvars.copy_context().run, run)
    # Until the worker runs, the caller lets it have the interpreter: a thread asking
    # for the lock waits out the switch interval (5 ms) while the caller computes, and
    # the embedder frees the lock as soon as it is under way.
    started.wait()
    return Later(call, future)
