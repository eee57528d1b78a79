"""Tideline: a long-term memory substrate for LLM agents.

Open a store with :meth:`Memory.open`, then ``remember``/``write``, ``recall``,
``reflect``, ``revise`` and ``forget``; import raw conversation with ``add_turns``.

The names below are imported on first use (PEP 562), so that a process which
only needs a light submodule — a Claude Code hook answering in milliseconds —
does not pay for numpy, the vector index and the recall engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tideline.config import Config
    from tideline.errors import (
        Conflict,
        EmbedderError,
        EmbedderMismatch,
        InputTooLarge,
        InvalidInput,
        NotFound,
        SchemaTooNew,
        StoreBusy,
        StoreClosed,
        StoreCorrupt,
        StoreError,
        StoreFull,
        TidelineError,
    )
    from tideline.memory import ImportResult, Memory
    from tideline.models import MemoryRecord, RecallItem, RecallPacket, Turn, WriteResult

#: The version of the ``tideline-memory`` distribution this package is.
from tideline._version import __version__

#: The public API, the one list of it: each name is imported on first use from the
#: first module of ``_SOURCES`` whose own ``__all__`` holds it (the ``TYPE_CHECKING``
#: imports above repeat it for type checkers; ``tests/test_exports.py`` keeps the two
#: in step).
__all__ = [
    "Config",
    "Conflict",
    "EmbedderError",
    "EmbedderMismatch",
    "ImportResult",
    "InputTooLarge",
    "InvalidInput",
    "Memory",
    "MemoryRecord",
    "NotFound",
    "RecallItem",
    "RecallPacket",
    "SchemaTooNew",
    "StoreBusy",
    "StoreClosed",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "TidelineError",
    "Turn",
    "WriteResult",
    "__version__",
]

# Lightest first: a hook that only needs an error class never imports the facade.
_SOURCES = ("tideline.errors", "tideline.models", "tideline.config", "tideline.memory")


def __getattr__(name: str) -> Any:
    if name in __all__:
        for source in _SOURCES:
            module = importlib.import_module(source)
            if name in getattr(module, "__all__", ()):
                value = getattr(module, name)
                globals()[name] = value
                return value
    raise AttributeError(f"module 'tideline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

