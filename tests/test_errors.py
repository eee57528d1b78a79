"""The error tree's codes: every class declares its own, and every surface lists them.

Issue 11 ("Guard it", review §1 "Errors"): ``JSONRPC_CODES`` once missed the DREAM
classes, so ``LLMOutputInvalid`` and ``DreamTooLarge`` reached MCP clients as -32603
("internal"); ``ArchiveInvalid``, ``UnsafePath`` and ``BackendUnavailable`` inherited
their number silently and were missing from the published tables.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tideline.dream.errors
import tideline.mcp.errors
from tideline.errors import TidelineError
from tideline.mcp.errors import JSONRPC_CODES, describe

ROOT = Path(__file__).resolve().parents[1]


def _tree() -> list[type[TidelineError]]:
    out: list[type[TidelineError]] = []
    todo: list[type[TidelineError]] = [TidelineError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(out, key=lambda c: c.code)


TREE = _tree()


def test_the_tree_includes_the_dream_errors() -> None:
    names = {c.__name__ for c in TREE}
    assert set(tideline.dream.errors.__all__) <= names
    assert {"ArchiveInvalid", "UnsafePath", "BackendUnavailable"} <= names


@pytest.mark.parametrize("cls", TREE, ids=lambda c: c.__name__)
def test_every_error_class_declares_its_three_codes(cls: type[TidelineError]) -> None:
    for attr in ("code", "exit_code", "jsonrpc_code"):
        assert attr in vars(cls), f"{cls.__name__} inherits {attr} instead of declaring it"
    assert cls.jsonrpc_code != JSONRPC_CODES["internal"]
    assert JSONRPC_CODES[cls.code] == cls.jsonrpc_code
    # What an MCP client sees for an instance: the class's code, never "internal".
    code, _message, number = describe(cls.__new__(cls), "test")
    assert (code, number) == (cls.code, cls.jsonrpc_code)


def test_codes_and_exit_codes_are_distinct() -> None:
    assert len({c.code for c in TREE}) == len(TREE)
    assert len({c.exit_code for c in TREE}) == len(TREE)


@pytest.mark.parametrize("where", ["mcp/errors.py", "docs/agents.md"])
def test_the_published_tables_list_every_code(where: str) -> None:
    text = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8") if where.startswith(
        "docs") else tideline.mcp.errors.__doc__ or ""
    for code, number in JSONRPC_CODES.items():
        row = re.compile(rf"^\|?\s*`?{code}`?\s*\|?\s+{number}\b", re.MULTILINE)
        assert row.search(text), f"{where} does not list {code} ({number})"
