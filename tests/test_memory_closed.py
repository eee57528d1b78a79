"""A closed ``Memory`` answers every verb with a typed ``StoreClosed``.

Carried over from the issue 11 notes: after ``close()`` a call reached the closed
driver and raised its own untyped error (``sqlite3.ProgrammingError: Cannot operate on
a closed database``, psycopg's ``PoolClosed``). Now the facade refuses before it reaches
the store, on both backends, and ``close`` itself may be called again.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from tests.backend import Backend
from tests.conftest import hashing
from tests.reliability.test_hostile_args import VALID, _default, _params, public_methods

from tideline import Memory
from tideline.errors import InvalidInput, StoreClosed

pytestmark = pytest.mark.backends

#: Verbs that do not need the store: ``close`` (idempotent) and the ``open`` constructor.
NO_STORE = {"close", "open"}


def _call(mem: Memory, name: str) -> None:
    attr = inspect.getattr_static(Memory, name)
    args: dict[str, Any] = {p: VALID.get(p) for p in _params(name)
                            if _default(name, p) is inspect.Parameter.empty}
    if isinstance(attr, property):
        setattr(mem, name, args["value"])
    else:
        getattr(mem, name)(**args)


def test_every_verb_of_a_closed_memory_is_store_closed(mem: Memory) -> None:
    mem.remember("the orchard exports run nightly at 02:00")
    mem.close()
    for name in public_methods():
        if name in NO_STORE:
            continue
        try:
            _call(mem, name)
        except StoreClosed as exc:
            assert exc.code == "store_closed"
        except InvalidInput:
            # Arguments are checked before the store is needed (inject_tuning=None,
            # read_context without a selector): typed, and nothing was reached.
            pass
        else:
            pytest.fail(f"{name} ran on a closed Memory")
    mem.close()  # a second close is a no-op


def test_a_closed_memory_reopens_with_its_data(mem: Memory, store_dir: Path,
                                               backend: Backend) -> None:
    stored = mem.remember("Mira prefers short answers", kind="preference")
    mem.close()
    with pytest.raises(StoreClosed):
        mem.get(stored.id)
    with backend.open(store_dir, embedder=hashing(), project="global") as again:
        assert again.get(stored.id).text == "Mira prefers short answers"
