"""Issue 11: a bad archive is refused with a typed error and nothing is written."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.archive.helpers import lines, open_store, rewrite

from tideline.archive.exchange import archive_digest
from tideline.archive.format import ArchiveReader
from tideline.errors import (
    ArchiveInvalid,
    InputTooLarge,
    SchemaTooNew,
    TidelineError,
)
from tideline.store.sqlite.schema import SCHEMA_VERSION


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("src")
    with open_store(root / "A") as mem:
        mem.add_turns([{"session": "s", "role": "user", "text": f"turn {i} about E45{i}",
                        "id": f"m{i}"} for i in range(4)])
        first = mem.remember("the loader fails on E4521")
        mem.remember("Ana prefers tea", kind="preference")
        mem.revise(first.id, "the loader failed on E4521 until the CSV fix")
        path = root / "a.jsonl"
        mem.export(path)
    return path


def _empty_after(path: Path, tmp: Path, error: type[Exception] | tuple[type[Exception], ...],
                 match: str | None = None) -> None:
    with open_store(tmp / "B") as dest:
        before = archive_digest(dest.store)
        with pytest.raises(error, match=match):
            dest.import_archive(path)
        assert archive_digest(dest.store) == before
        assert dest.introspect()["memories"] == 0 and dest.introspect()["turns"] == 0


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / "bad.jsonl"
    dst.write_bytes(src.read_bytes())
    return dst


def test_not_json(archive: Path, tmp_path: Path) -> None:
    bad = _copy(archive, tmp_path)
    raw = lines(bad)
    raw.insert(2, "this is not JSON")
    bad.write_text("\n".join(raw) + "\n", encoding="utf-8")
    _empty_after(bad, tmp_path, ArchiveInvalid, "not JSON")


def test_not_an_archive_and_empty(tmp_path: Path) -> None:
    other = tmp_path / "chat.jsonl"
    other.write_text('{"session": "s", "role": "user", "text": "hi"}\n', encoding="utf-8")
    _empty_after(other, tmp_path, ArchiveInvalid, "not a Tideline archive")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    _empty_after(empty, tmp_path, ArchiveInvalid, "empty")


def test_wrong_format_version_and_newer_schema(archive: Path, tmp_path: Path) -> None:
    for field, value, error in (("version", 2, ArchiveInvalid),
                                ("schema_version", SCHEMA_VERSION + 1, SchemaTooNew)):
        bad = _copy(archive, tmp_path)
        raw = lines(bad)
        head = json.loads(raw[0])
        head[field] = value
        raw[0] = json.dumps(head)
        bad.write_text("\n".join(raw) + "\n", encoding="utf-8")
        _empty_after(bad, tmp_path, error)


def test_truncated(archive: Path, tmp_path: Path) -> None:
    data = archive.read_bytes()
    bad = tmp_path / "cut.jsonl"
    bad.write_bytes(b"".join(data.splitlines(keepends=True)[:-1]))
    _empty_after(bad, tmp_path, ArchiveInvalid, "no trailer")
    bad.write_bytes(data[: len(data) // 2])
    _empty_after(bad, tmp_path, ArchiveInvalid, "truncated")


def test_tampered_row(archive: Path, tmp_path: Path) -> None:
    bad = _copy(archive, tmp_path)
    bad.write_text(bad.read_text("utf-8").replace("Ana prefers tea", "Ana prefers rum"),
                   encoding="utf-8")
    _empty_after(bad, tmp_path, ArchiveInvalid, "sha256")


def _edit_memory(fn: Callable[[dict[str, Any]], None]) -> Callable[..., list[dict[str, Any]]]:
    def edit(header: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in rows:
            if r["t"] == "memories":
                fn(r["r"])
                break
        return rows
    return edit


@pytest.mark.parametrize(("name", "edit", "match"), [
    ("nul", _edit_memory(lambda r: r.update(gesture="a\x00b")), "NUL"),
    ("surrogate", _edit_memory(lambda r: r.update(gesture="a\ud800b")), "surrogate"),
    ("unknown column", _edit_memory(lambda r: r.update(colour="red")), "no column"),
    ("wrong type", _edit_memory(lambda r: r.update(importance="high")), "must be integer"),
    ("bool", _edit_memory(lambda r: r.update(importance=True)), "bool"),
    ("check", _edit_memory(lambda r: r.update(importance=9)), "CHECK"),
    ("null", _edit_memory(lambda r: r.update(gesture=None)), "null"),
    ("json column", _edit_memory(lambda r: r.update(tags="not json")), "JSON"),
    ("huge int", _edit_memory(lambda r: r.update(version=2**70)), "range"),
    ("dangling", _edit_memory(lambda r: r.update(supersedes=999_999)), "missing rows"),
    ("unknown table", lambda h, rows: rows + [{"t": "secrets", "r": {"k": 1}}],
     "unknown table"),
    ("order", lambda h, rows: rows[::-1], "out of order"),
])
def test_bad_rows_with_a_valid_checksum(archive: Path, tmp_path: Path, name: str,
                                        edit: Any, match: str) -> None:
    bad = _copy(archive, tmp_path)
    rewrite(bad, edit)
    _empty_after(bad, tmp_path, ArchiveInvalid, match)


def test_oversized_line(archive: Path, tmp_path: Path) -> None:
    bad = _copy(archive, tmp_path)
    with pytest.raises(InputTooLarge):
        ArchiveReader(bad, SCHEMA_VERSION, max_line=256).verify()
    rewrite(bad, _edit_memory(lambda r: r.update(context="x" * (9 * 2**20))))
    _empty_after(bad, tmp_path, InputTooLarge)


def test_nan_and_duplicate_keys(archive: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    for old, new, match in (('"weight":', '"weight":NaN,"x_weight":', "NaN"),
                            ('"kind":', '"kind":"fact","kind":', "duplicate")):
        raw = lines(archive)
        at = next(i for i, x in enumerate(raw) if x.startswith('{"t":"memories"'))
        assert old in raw[at]
        raw[at] = raw[at].replace(old, new, 1)
        bad.write_text("\n".join(raw) + "\n", encoding="utf-8")
        _empty_after(bad, tmp_path, ArchiveInvalid, match)


@pytest.fixture(scope="module")
def expected(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    with open_store(tmp_path_factory.mktemp("ref") / "ref") as ref:
        ref.import_archive(archive)
        return archive_digest(ref.store)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), how=st.sampled_from(["flip", "cut", "dup", "drop",
                                                            "junk"]))
def test_any_damage_is_refused_or_harmless(archive: Path, expected: str,
                                           tmp_path_factory: pytest.TempPathFactory,
                                           seed: int, how: str) -> None:
    """Property: whatever happens to the bytes, the import either refuses with a typed error
    and writes nothing, or loads exactly the source's rows (a change outside the checksum,
    such as the header's time)."""
    rng = random.Random(seed)
    data = bytearray(archive.read_bytes())
    chunks = data.splitlines(keepends=True)
    if how == "flip":
        i = rng.randrange(len(data))
        data[i] = (data[i] + rng.randrange(1, 256)) % 256
    elif how == "cut":
        data = data[: rng.randrange(len(data))]
    elif how == "dup":
        i = rng.randrange(len(chunks))
        chunks.insert(i, chunks[i])
        data = bytearray(b"".join(chunks))
    elif how == "drop":
        del chunks[rng.randrange(len(chunks))]
        data = bytearray(b"".join(chunks))
    else:
        i = rng.randrange(len(data))
        data[i:i] = rng.randbytes(rng.randrange(1, 40))
    tmp = tmp_path_factory.mktemp("fuzz")
    bad = tmp / "bad.jsonl"
    bad.write_bytes(bytes(data))
    with open_store(tmp / "B") as dest:
        before = archive_digest(dest.store)
        try:
            dest.import_archive(bad)
        except TidelineError:
            assert archive_digest(dest.store) == before
        else:
            assert archive_digest(dest.store) == expected


def test_unknown_table_in_a_row(archive: Path, tmp_path: Path) -> None:
    bad = _copy(archive, tmp_path)
    raw = lines(bad)
    raw.insert(len(raw) - 1, '{"t":"secrets","r":{"k":1}}')
    bad.write_text("\n".join(raw) + "\n", encoding="utf-8")
    _empty_after(bad, tmp_path, ArchiveInvalid, "unknown table 'secrets'")


def test_raw_nul_byte_and_bad_utf8(archive: Path, tmp_path: Path) -> None:
    data = archive.read_bytes()
    at = data.index(b"Ana prefers tea")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data[:at] + b"\x00" + data[at + 1:])
    _empty_after(bad, tmp_path, ArchiveInvalid, "not JSON")
    bad.write_bytes(data[:at] + b"\xed\xa0\x80" + data[at + 3:])  # a surrogate, CESU-style
    _empty_after(bad, tmp_path, ArchiveInvalid, "not UTF-8")
