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
        StoreCorrupt,
        StoreError,
        StoreFull,
        TidelineError,
    )
    from tideline.memory import ImportResult, Memory
    from tideline.models import MemoryRecord, RecallItem, RecallPacket, Turn, WriteResult

from tideline._version import __version__

_WHERE = {
    "Config": "tideline.config",
    "Conflict": "tideline.errors",
    "EmbedderError": "tideline.errors",
    "EmbedderMismatch": "tideline.errors",
    "InputTooLarge": "tideline.errors",
    "InvalidInput": "tideline.errors",
    "NotFound": "tideline.errors",
    "SchemaTooNew": "tideline.errors",
    "StoreBusy": "tideline.errors",
    "StoreCorrupt": "tideline.errors",
    "StoreError": "tideline.errors",
    "StoreFull": "tideline.errors",
    "TidelineError": "tideline.errors",
    "ImportResult": "tideline.memory",
    "Memory": "tideline.memory",
    "MemoryRecord": "tideline.models",
    "RecallItem": "tideline.models",
    "RecallPacket": "tideline.models",
    "Turn": "tideline.models",
    "WriteResult": "tideline.models",
}

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
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "TidelineError",
    "Turn",
    "WriteResult",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'tideline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

