"""Reads started ahead (tideline.recall.ahead): lazy in process, in a worker on a server."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tideline.recall.ahead import later


def test_in_process_a_read_runs_once_where_it_is_first_needed() -> None:
    calls: list[str] = []
    pending = later(lambda: calls.append(threading.current_thread().name) or 7,
                    parallel=False)
    assert calls == []
    assert pending.get() == 7 and pending.get() == 7
    assert calls == [threading.current_thread().name]


def test_in_parallel_a_read_runs_in_a_worker_and_its_error_comes_back() -> None:
    names = later(lambda: threading.current_thread().name, parallel=True)
    assert names.get().startswith("tideline-recall")

    def fail() -> int:
        raise KeyError("gone")

    failed = later(fail, parallel=True)
    with pytest.raises(KeyError):
        failed.get()


def test_a_forked_child_gets_workers_of_its_own() -> None:
    """The pool the parent made has no threads in a forked child; the child's read ran
    anyway (it hung before the pool was forgotten at fork)."""
    assert later(lambda: 1, parallel=True).get() == 1
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if its read came back (SIGALRM kills a hang)
        signal.alarm(20)
        code = 0 if later(lambda: 2, parallel=True).get() == 2 else 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
