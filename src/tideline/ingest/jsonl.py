"""Generic JSONL chat import: one JSON object per line, streamed.

Each object holds ``session``, ``role`` or ``speaker``, ``text`` (or
``content``), ``timestamp`` and ``id`` (the source's message id); see
:mod:`tideline.ingest.turns` for what identifies a turn without an id.

A file of any length is read line by line and stored in batches (each batch one
transaction), so memory stays bounded and an import killed at any point is
completed by running it again: what is stored is skipped, the rest is appended.
Only a line has a size cap (``Caps.line_bytes``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tideline.errors import InputTooLarge, InvalidInput, NotFound

__all__ = ["count_lines", "iter_jsonl"]

_CHUNK = 1 << 20


def _check(path: Path) -> None:
    if not path.is_file():
        if path.exists():  # a FIFO would hang the read, a device never ends
            raise InvalidInput(f"{path} is not a regular file")
        raise NotFound(f"no such file: {path}")


def count_lines(path: Path) -> int:
    """How many lines the file has (a last line without a newline counts), for progress.

    Raises:
        NotFound: the file does not exist.
    """
    _check(path)
    lines = 0
    last = b"\n"
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (0 if last == b"\n" else 1)


def iter_jsonl(path: Path, *, line_bytes: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of a JSONL file.

    Raises:
        NotFound: the file does not exist.
        InvalidInput: a line is not UTF-8 or not a JSON object (the message names it).
        InputTooLarge: a line is longer than ``line_bytes`` bytes.
    """
    _check(path)
    with path.open("rb") as fh:
        number = 0
        while True:
            raw = fh.readline(line_bytes + 1)
            if not raw:
                return
            number += 1
            if len(raw) > line_bytes and not raw.endswith(b"\n"):
                raise InputTooLarge(f"{path}:{number}: line longer than {line_bytes} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInput(f"{path}:{number}: not UTF-8 text ({exc.reason})") from exc
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{path}:{number}: not JSON ({exc.msg})") from exc
            except ValueError:  # a number too long to convert (over 4,300 digits)
                raise InvalidInput(f"{path}:{number}: a number in it is too long") from None
            except RecursionError as exc:
                raise InvalidInput(f"{path}:{number}: JSON nested too deeply") from exc
            if not isinstance(obj, dict):
                raise InvalidInput(f"{path}:{number}: expected a JSON object")
            yield number, obj
