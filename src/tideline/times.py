"""The range of times Tideline stores: real instants from year 1 to year 9999, in UTC.

Every time that enters (event times, turn timestamps, ``since``/``until``) is
checked here where it enters (:func:`check_epoch`, :func:`check_datetime`), so
that rendering it later can never fail. Rows written before that check existed
may still hold an impossible value (``1e20``, ``inf``, text); reading goes
through :func:`stored_time` / :func:`clamped_time`, which skip or clamp such a
value instead of failing, and ``doctor`` reports and repairs the rows.
"""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime, timedelta, timezone

from tideline.errors import InvalidInput

__all__ = [
    "MAX_TS",
    "MIN_TS",
    "check_datetime",
    "check_epoch",
    "clamped_time",
    "iso",
    "stored_time",
    "time_in_range",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: 0001-01-01T00:00:00Z in epoch seconds (the first instant :mod:`datetime` can show).
MIN_TS = -62_135_596_800.0
#: 9999-12-31T23:59:59Z: the last whole second of year 9999. A fraction beyond it would
#: round to year 10000 when rendered with microseconds, so the bound is inclusive here.
MAX_TS = 253_402_300_799.0
_RANGE = "a date: give a real instant between 0001-01-01 and 9999-12-31T23:59:59 UTC"


def time_in_range(value: object) -> bool:
    """Whether ``value`` is a finite number of epoch seconds inside the stored range."""
    if type(value) is float:  # what a REAL column reads back as (NaN fails both bounds)
        return MIN_TS <= value <= MAX_TS
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        seconds = float(value)
    except OverflowError:  # an int too large for a float
        return False
    return math.isfinite(seconds) and MIN_TS <= seconds <= MAX_TS


def check_epoch(value: int | float, field: str) -> float:
    """Epoch seconds as a float, refused unless a real instant in range.

    Raises:
        InvalidInput: NaN, infinite, or outside year 1–9999 UTC.
    """
    seconds = None
    if not isinstance(value, bool) and isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = None
    return _accept(seconds, _shown(value), field)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _accept(seconds: float | None, shown: str, field: str) -> float:
    # The last second of 9999 is accepted whole: its fractions are kept at its start.
    if seconds is not None and not math.isfinite(seconds):
        raise InvalidInput(f"{field} {shown} is not a date: a time must be finite")
    if seconds is None or not MIN_TS <= seconds < MAX_TS + 1:
        raise InvalidInput(f"{field} {shown} is not {_RANGE}")
    return min(seconds, MAX_TS)


def check_datetime(value: datetime, field: str) -> float:
    """A datetime as epoch seconds; naive ones are local time.

    Aware datetimes are converted by subtraction, which cannot overflow where
    :meth:`datetime.timestamp` would (year 1 east of UTC, year 9999 west of it).

    Raises:
        InvalidInput: the instant falls outside year 1–9999 UTC.
    """
    moment = value
    try:
        offset = moment.utcoffset()
    except ValueError as exc:  # a tzinfo answering 24 h or more
        raise InvalidInput(f"{field} is not a date: its UTC offset is over 24 hours") from exc
    if offset is None:
        try:
            moment = moment.astimezone()
        except (ValueError, OverflowError, OSError):
            # The platform's local-time tables end before year 1 or 9999; today's offset
            # is the best guess there is for a naive time that far away.
            here = datetime.now().astimezone().utcoffset() or timedelta(0)
            moment = moment.replace(tzinfo=timezone(here))
    try:
        delta = moment - _EPOCH
    except (ValueError, OverflowError) as exc:
        raise InvalidInput(f"{field} {value.isoformat()!r} is not {_RANGE}") from exc
    # Whole seconds first: a float sum would round 23:59:59.999999 up into year 10000.
    whole = delta.days * 86_400 + delta.seconds
    if not MIN_TS <= whole <= MAX_TS:
        raise InvalidInput(f"{field} {_shown(value.isoformat())} is not {_RANGE}")
    return min(whole + delta.microseconds / 1e6, MAX_TS)


def stored_time(value: object) -> float | None:
    """A stored optional time as read back: ``None`` when it is missing or impossible."""
    return float(value) if time_in_range(value) else None  # type: ignore[arg-type]


def clamped_time(value: object) -> float:
    """A stored required time as read back: impossible values are clamped into range.

    A number beyond either end becomes that end; anything else (NaN, text) becomes 0.
    """
    if time_in_range(value):
        return float(value)  # type: ignore[arg-type]
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            return MAX_TS if value > 0 else MIN_TS
        if not math.isnan(seconds):
            return MAX_TS if seconds > 0 else MIN_TS
    return 0.0


# Recall renders the same few session dates for every item it returns.
@functools.lru_cache(maxsize=4096)
def _iso_of(seconds: float) -> str:
    moment = _EPOCH + timedelta(seconds=math.floor(seconds))
    return moment.isoformat(timespec="seconds")


def iso(ts: object) -> str | None:
    """Epoch seconds as ISO 8601 in UTC, to the second; ``None`` (or an impossible value) is None.

    Never raises: a value outside the stored range renders as ``None`` rather than
    failing the whole read that shows it.
    """
    seconds = stored_time(ts)
    return None if seconds is None else _iso_of(seconds)
