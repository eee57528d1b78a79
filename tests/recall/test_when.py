"""Calendar dates named in a query: parsing, and what recall does with them."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tideline import Memory
from tideline.recall.when import find_window


def _days(query: str) -> tuple[date, date, str] | None:
    w = find_window(query)
    if w is None:
        return None
    return (datetime.fromtimestamp(w.start, UTC).date(),
            datetime.fromtimestamp(w.end, UTC).date(), w.unit)


@pytest.mark.parametrize(("query", "start", "end", "unit"), [
    ("What did Nadia do on 22 June 2024?", date(2024, 6, 22), date(2024, 6, 23), "day"),
    ("plans for June 22nd, 2024", date(2024, 6, 22), date(2024, 6, 23), "day"),
    ("the 3rd of March 2021", date(2021, 3, 3), date(2021, 3, 4), "day"),
    ("Sept. 3, 2023", date(2023, 9, 3), date(2023, 9, 4), "day"),
    ("deploy 2024-06-22 failed", date(2024, 6, 22), date(2024, 6, 23), "day"),
    ("Was war am 22. Juni 2024?", date(2024, 6, 22), date(2024, 6, 23), "day"),
    ("что было 22 июня 2024?", date(2024, 6, 22), date(2024, 6, 23), "day"),
    ("2024年6月22日发生了什么", date(2024, 6, 22), date(2024, 6, 23), "day"),
    ("What was Sam doing in January 2024?", date(2024, 1, 1), date(2024, 2, 1), "month"),
    ("im März 2024", date(2024, 3, 1), date(2024, 4, 1), "month"),
    ("в июне 2024 года", date(2024, 6, 1), date(2024, 7, 1), "month"),
    ("2024年2月的会议", date(2024, 2, 1), date(2024, 3, 1), "month"),
    ("release 2024-02", date(2024, 2, 1), date(2024, 3, 1), "month"),
    ("what changed in 2023", date(2023, 1, 1), date(2024, 1, 1), "year"),
    ("в 2022 году", date(2022, 1, 1), date(2023, 1, 1), "year"),
    # The most specific date wins over a broader one named first.
    ("in 2024, on 5 May 2024 exactly", date(2024, 5, 5), date(2024, 5, 6), "day"),
])
def test_dates_are_read(query: str, start: date, end: date, unit: str) -> None:
    assert _days(query) == (start, end, unit)


@pytest.mark.parametrize("query", [
    "port 2023 is closed", "error E2023", "v2024-06-22x", "may I ask about 2024",
    "Feb 30, 2024", "2024-13-01", "in March", "yesterday", "",
])
def test_non_dates_are_not_read(query: str) -> None:
    assert find_window(query) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_safe(text: str) -> None:
    w = find_window(text)
    assert w is None or w.start < w.end


def _turn(session: str, n: int, speaker: str, text: str, day: str) -> dict[str, object]:
    return {"session": session, "speaker": speaker, "role": "user", "text": text,
            "id": f"{session}:{n}", "timestamp": f"{day}T18:{n:02d}:00+00:00"}


def test_a_named_date_brings_in_what_was_said_then(mem: Memory) -> None:
    may = [
        _turn("s1", 1, "Ana", "we finally tried the new ramen place downtown", "2024-05-03"),
        _turn("s1", 2, "Ben", "how was it?", "2024-05-03"),
        _turn("s1", 3, "Ana", "salty but the broth was great", "2024-05-03"),
    ]
    june = [
        _turn("s2", 1, "Ana", "we finally tried the new taco truck by the station",
              "2024-06-14"),
        _turn("s2", 2, "Ben", "jealous, tacos are my weakness", "2024-06-14"),
        _turn("s2", 3, "Ana", "also my sister visited, she brought her dog", "2024-06-14"),
    ]
    mem.add_turns(may + june, source="chat")

    packet = mem.recall("What did Ana do on 14 June 2024?", log=False, limit=6)
    assert packet.filters["date_window"] == ["2024-06-14T00:00:00+00:00",
                                             "2024-06-15T00:00:00+00:00"]
    order = [i.message_id for i in packet.items if i.type == "turn"]
    # Ana's June turns come before her May turns, the sister's visit included although
    # it shares no word with the question; Ben's June reply is brought in by its date.
    assert order.index("s2:3") < min(order.index("s1:1"), order.index("s1:3"))
    assert order.index("s2:1") < min(order.index("s1:1"), order.index("s1:3"))
    assert "s2:2" in order

    plain = mem.recall("What did Ana do?", log=False, limit=6)
    assert plain.filters["date_window"] is None


def test_explicit_filters_win_over_a_date_in_the_text(mem: Memory) -> None:
    mem.add_turns([_turn("s1", 1, "Ana", "trip to Porto", "2024-05-03")], source="chat")
    packet = mem.recall("what happened on 3 May 2024", since="2024-05-01", log=False)
    assert packet.filters["date_window"] is None
