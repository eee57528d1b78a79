"""Generic JSONL chat import: one JSON object per line.

Each object holds ``session``, ``role`` or ``speaker``, ``text`` (or
``content``), ``timestamp`` and ``id`` (the source's message id).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tideline.errors import InputTooLarge, InvalidInput, NotFound

__all__ = ["read_jsonl"]

MAX_FILE_BYTES = 512 * 1024 * 1024


def read_jsonl(path: Path, *, max_lines: int = 1_000_000) -> list[dict[str, Any]]:
    """Read a JSONL chat file; blank lines are skipped.

    Raises:
        NotFound: the file does not exist.
        InvalidInput: a line is not a JSON object (the message names the line).
        InputTooLarge: the file is over 512 MiB or ``max_lines``.
    """
    if not path.is_file():
        raise NotFound(f"no such file: {path}")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InputTooLarge(f"{path} is larger than {MAX_FILE_BYTES} bytes")
    rows: list[dict[str, Any]] = []
    with path.open("r", encoding="utf-8", errors="strict") as fh:
        try:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                if len(rows) >= max_lines:
                    raise InputTooLarge(f"{path} has more than {max_lines} lines")
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InvalidInput(f"{path}:{number}: not JSON ({exc.msg})") from exc
                if not isinstance(obj, dict):
                    raise InvalidInput(f"{path}:{number}: expected a JSON object")
                rows.append(obj)
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{path}: not UTF-8 text ({exc.reason})") from exc
    return rows
