"""Tideline: a long-term memory substrate for LLM agents.

Open a store with :meth:`Memory.open`, then ``remember``/``write``, ``recall``,
``reflect``, ``revise`` and ``forget``; import raw conversation with ``add_turns``.
"""

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

__version__ = "0.1.0"

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
