"""Explicit calendar dates in a query: "on 22 June 2024", "im März 2024", "2024年6月".

A question that names a day, a month or a year asks about what happened then. This
module finds the first such date in the query and turns it into a time window (UTC
epoch seconds, end exclusive), which recall uses to boost items from that time and
to bring in raw turns spoken then even when their words differ from the query's.

Only absolute dates are read: a bare month ("in March") or a relative phrase
("yesterday") needs a reference time the query does not carry. A bare four-digit
number is a year only after a preposition ("in 2023", "im Jahr 2023", "в 2023") or
before 年 — ``port 2023`` or ``E2023`` are not dates.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["Window", "find_window"]

_MONTHS: dict[str, int] = {}
for _number, _names in enumerate((
    "january jan januar janv январ янв",
    "february feb februar feber феврал фев",
    "march mar märz maerz marz март марта",
    "april apr апрел апр",
    "may mai ма мая май",
    "june jun juni июн",
    "july jul juli июл",
    "august aug август авг",
    "september sep sept сентябр сен",
    "october oct oktober okt октябр окт",
    "november nov ноябр ноя",
    "december dec dezember dez декабр дек",
), start=1):
    for _name in _names.split():
        _MONTHS[_name] = _number

# Russian month words are matched by stem ("июня", "июне", "июнь"); the others whole.
_RU_STEMS = sorted((n for n in _MONTHS if "\u0400" <= n[0] <= "\u04ff" and len(n) >= 3),
                   key=len, reverse=True)
_LATIN = sorted((n for n in _MONTHS if n.isascii() or "ä" in n), key=len, reverse=True)
_MONTH = (r"(?P<m>(?:" + "|".join(map(re.escape, _LATIN)) + r")\.?|(?:"
          + "|".join(map(re.escape, _RU_STEMS)) + r")[а-я]*)")
_YEAR = r"(?P<y>(?:19|20)\d\d)"
_DAY = r"(?P<d>[0-3]?\d)"
_ORD = r"(?:st|nd|rd|th|\.|-?го)?"

_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"(?<![\w-])" + _YEAR + r"-(?P<mn>[01]\d)(?:-(?P<dn>[0-3]\d))?(?![\w-])",  # ISO
    _YEAR + r"\s*年\s*(?:(?P<mn>1[0-2]|0?[1-9])\s*月\s*(?:(?P<dn>[0-3]?\d)\s*[日号])?)?",
    r"(?<!\w)" + _DAY + _ORD + r"\s*(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR + r"(?!\w)",
    r"(?<!\w)" + _MONTH + r"\s+" + _DAY + _ORD + r",?\s+" + _YEAR + r"(?!\w)",
    r"(?<!\w)" + _MONTH + r",?\s+" + _YEAR + r"(?!\w)",
    r"(?<!\w)(?:in|during|since|im|jahr|в|во|году)\s+(?:the\s+year\s+|jahr\s+)?" + _YEAR
    + r"(?!\w)",
))


@dataclass(frozen=True)
class Window:
    """A calendar span named in a query: ``[start, end)`` in UTC epoch seconds."""

    start: float
    end: float
    text: str
    unit: str  # "day", "month" or "year"


def _month_number(word: str) -> int | None:
    w = word.casefold().rstrip(".")
    if w in _MONTHS:
        return _MONTHS[w]
    for stem in _RU_STEMS:
        if w.startswith(stem):
            return _MONTHS[stem]
    return None


def _span(year: int, month: int | None, day: int | None) -> tuple[float, float, str] | None:
    try:
        if month is None:
            start = datetime(year, 1, 1, tzinfo=UTC)
            return start.timestamp(), datetime(year + 1, 1, 1, tzinfo=UTC).timestamp(), "year"
        if day is None:
            start = datetime(year, month, 1, tzinfo=UTC)
            last = calendar.monthrange(year, month)[1]
            end = datetime(year, month, last, tzinfo=UTC).timestamp() + 86_400
            return start.timestamp(), end, "month"
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return start.timestamp(), start.timestamp() + 86_400, "day"


def find_window(query: str) -> Window | None:
    """The first explicit calendar date named in ``query``, as a time window.

    Args:
        query: free text in any language.

    Returns:
        The window, or None when the query names no absolute date.
    """
    best: tuple[int, Window] | None = None
    for pattern in _PATTERNS:
        for match in pattern.finditer(query[:2_000]):
            groups = match.groupdict()
            year = int(groups["y"])
            month: int | None = None
            if groups.get("mn"):
                month = int(groups["mn"])
            elif groups.get("m"):
                month = _month_number(groups["m"])
                if month is None:
                    continue
            day = int(groups["d"]) if groups.get("d") else (
                int(groups["dn"]) if groups.get("dn") else None)
            span = _span(year, month, day)
            if span is None:
                continue
            window = Window(span[0], span[1], match.group().strip(), span[2])
            # The most specific reading wins (a day over its month), then the earliest.
            rank = {"day": 0, "month": 1, "year": 2}[window.unit] * 10_000 + match.start()
            if best is None or rank < best[0]:
                best = (rank, window)
            break
    return best[1] if best else None
