"""Timestamps as exports write them: ISO, epoch, and dates written out in words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tideline import Memory
from tideline.errors import InvalidInput
from tideline.write.validate import parse_time


def _utc(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("text", "expected"), [
    ("1:56 pm on 8 May, 2023", _utc(2023, 5, 8, 13, 56)),
    ("10:37 am on 27 June, 2023", _utc(2023, 6, 27, 10, 37)),
    ("May 8, 2023 13:56", _utc(2023, 5, 8, 13, 56)),
    ("8 May 2023", _utc(2023, 5, 8)),
    ("2023/05/08 13:56", _utc(2023, 5, 8, 13, 56)),
    ("Mon, 08 May 2023 13:56:00 GMT", _utc(2023, 5, 8, 13, 56)),
    ("2023-05-08T15:56:00+02:00", _utc(2023, 5, 8, 13, 56)),
    ("1683554160", 1683554160.0),
])
def test_written_dates_are_read(text: str, expected: float) -> None:
    got = parse_time(text)
    assert got is not None
    if "+" in text or "GMT" in text or text.isdigit():
        assert got == expected
    else:  # no zone written: local time, as for naive ISO 8601
        naive = datetime.fromtimestamp(expected, UTC).replace(tzinfo=None)
        assert got == naive.astimezone().timestamp()


@pytest.mark.parametrize("text", [
    "hello 2023", "E2023", "yesterday", "31 February 2023", "nan", "inf", "x" * 500,
])
def test_what_is_not_a_date_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput, match="not a date"):
        parse_time(text)


def test_non_finite_numbers_are_refused() -> None:
    with pytest.raises(InvalidInput, match="finite"):
        parse_time(float("nan"))


def test_import_with_written_dates_keeps_the_order_and_the_day(
    mem: Memory, tmp_path: Path,
) -> None:
    chat = tmp_path / "chat.jsonl"
    rows = [
        {"session": "s1", "speaker": "Caroline", "text": "I went to a support group today",
         "timestamp": "1:56 pm on 8 May, 2023", "id": "D1:1"},
        {"session": "s1", "speaker": "Melanie", "text": "how was it?",
         "timestamp": "1:57 pm on 8 May, 2023", "id": "D1:2"},
        {"session": "s2", "speaker": "Caroline", "text": "I painted a sunrise",
         "timestamp": "10:37 am on 27 June, 2023", "id": "D2:1"},
    ]
    chat.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert mem.import_jsonl(chat)["inserted"] == 3
    turns = mem.store.session_turns("s1")
    assert [t.message_id for t in turns] == ["D1:1", "D1:2"]
    assert turns[1].timestamp is not None and turns[0].timestamp is not None
    assert turns[1].timestamp - turns[0].timestamp == 60
    packet = mem.recall("what did Caroline do on 27 June 2023", log=False)
    assert packet.items[0].message_id == "D2:1"


def test_cli_refuses_a_bad_date_and_writes_nothing(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"session": "s1", "role": "user", "text": "hi", "id": "m1",
                                "timestamp": "sometime soon"}) + "\n")
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    store = tmp_path / "s"
    done = subprocess.run([sys.executable, "-m", "tideline", "turns", "import", str(chat),
                           "--store", str(store)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stderr
    assert "not a date" in done.stderr and "Traceback" not in done.stderr
    with Memory.open(store, embedder=None) as mem:
        assert mem.store.session_turns("s1") == []
