"""Input validation for everything that is about to be stored.

Rules: text is NFC-normalised; NUL and lone surrogates are rejected; every field
has a size cap; weights are integers 1–5; names (scope, namespace, kind, tags)
are short single-line strings. Secrets (API keys, tokens, private keys, passwords)
are redacted before anything reaches the database (:mod:`tideline.secrets`).
"""

from __future__ import annotations

import math
import operator
import os
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

from tideline.config import Caps
from tideline.errors import InputTooLarge, InvalidInput
from tideline.secrets import redact_secrets
from tideline.times import check_datetime, check_epoch
from tideline.write.identity import normalise_text

__all__ = [
    "INT64_MAX",
    "clean_callback",
    "clean_flag",
    "clean_instance",
    "clean_id",
    "clean_ids",
    "clean_int",
    "clean_list",
    "clean_number",
    "clean_paths",
    "clean_seq",
    "clean_name",
    "clean_text",
    "clean_weight",
    "parse_time",
    "redact_secrets",
]

_NAME_RE = re.compile(r"^[\w][\w .:@/+-]*$", re.UNICODE)


def clean_text(value: object, field: str, cap: int, *, required: bool = False) -> str:
    """Validate and normalise one text field.

    Args:
        value: the raw value (must be a ``str`` or ``None``).
        field: the field name, for error messages.
        cap: maximum length in characters after normalisation.
        required: reject empty (whitespace-only) text.

    Returns:
        The NFC-normalised text, stripped, with secrets redacted.

    Raises:
        InvalidInput: not a string, NUL byte, lone surrogate, or empty when required.
        InputTooLarge: longer than ``cap``.
    """
    text = normalise_text(value, field, cap, required=required)
    text, _ = redact_secrets(text)
    return text


def clean_name(value: object, field: str, caps: Caps) -> str:
    """Validate a scope, namespace, kind, speaker or tag-like name.

    Raises:
        InvalidInput: empty, multi-line or containing characters outside ``[\\w .:@/+-]``.
        InputTooLarge: longer than the name cap.
    """
    text = clean_text(value, field, caps.name_chars, required=True)
    if not _NAME_RE.match(text):
        raise InvalidInput(f"{field} {text!r} may hold letters, digits and ' .:@/+-_' only")
    return text


def clean_list(
    values: Iterable[object] | None, field: str, *, item_cap: int, count_cap: int
) -> tuple[str, ...]:
    """Validate a list of short strings (tags, entities); order kept, duplicates dropped.

    Raises:
        InvalidInput: an item is not text or is invalid.
        InputTooLarge: too many items or an item too long.
    """
    if values is None:
        return ()
    if isinstance(values, str):
        values = [v for v in re.split(r"[,\n]", values) if v.strip()]
    items = clean_seq(values, field)
    if len(items) > count_cap:
        raise InputTooLarge(f"{field} has {len(items)} items; the cap is {count_cap}")
    out: list[str] = []
    for raw in items:
        text = clean_text(raw, field, item_cap, required=True)
        if "\n" in text:
            raise InvalidInput(f"{field} items must be single-line")
        if text not in out:
            out.append(text)
    return tuple(out)


#: SQLite's INTEGER range: an id or count beyond it cannot be stored or compared.
INT64_MAX = 2**63 - 1


def clean_int(value: object, field: str, *, lo: int = 0, hi: int = INT64_MAX) -> int:
    """Validate an integer argument (an id, a limit, a count) without ever truncating it.

    Floats (even ``2.0``), bools and numeric strings are refused: ``forget(1.5)`` must
    not act on memory 1. Integer-like objects (``numpy.int64``) are accepted.

    Raises:
        InvalidInput: not an integer, or outside ``lo..hi``.
    """
    if isinstance(value, bool | float | str | bytes) or value is None:
        raise InvalidInput(f"{field} must be an integer, got {_shown(value)}")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidInput(f"{field} must be an integer, got {_shown(value)}") from None
    if not lo <= number <= hi:
        raise InvalidInput(f"{field} must be between {lo} and {hi}, got {_shown(number)}")
    return int(number)


def clean_id(value: object, field: str = "id") -> int:
    """Validate one row id: a positive integer within SQLite's range.

    Raises:
        InvalidInput: not an integer id in ``1..2**63-1``.
    """
    return clean_int(value, field, lo=1)


def clean_number(value: object, field: str, *, lo: float, hi: float) -> float:
    """Validate a real-number argument (a reward, a number of days, a wait).

    Raises:
        InvalidInput: not an int or float, NaN, infinite, or outside ``lo..hi``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{field} must be a number, got {_shown(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidInput(f"{field} must be between {lo:g} and {hi:g}") from None
    if not math.isfinite(number) or not lo <= number <= hi:
        raise InvalidInput(f"{field} must be between {lo:g} and {hi:g}, got {_shown(value)}")
    return number


def clean_flag(value: object, field: str) -> bool:
    """Validate a yes/no argument (``True``/``False`` only, never a truthy string).

    Raises:
        InvalidInput: not a bool.
    """
    if not isinstance(value, bool):
        raise InvalidInput(f"{field} must be true or false, got {_shown(value)}")
    return value


def clean_seq(values: object, field: str) -> list[object]:
    """A list or tuple argument as a list (text, mappings and scalars are refused).

    Raises:
        InvalidInput: not a list or tuple (a string is not a list of ids).
    """
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise InvalidInput(f"{field} must be a list, got {_shown(values)}")
    return list(values)


def clean_instance(value: object, types: type | tuple[type, ...], field: str,
                   what: str) -> None:
    """Refuse an argument of the wrong kind (a config, an embedder, a callback) up front.

    Raises:
        InvalidInput: ``value`` is not ``None`` and not an instance of ``types``.
    """
    if value is not None and not isinstance(value, types):
        raise InvalidInput(f"{field} must be {what}, got {_shown(value)}")


def clean_callback(value: object, field: str = "progress") -> None:
    """Refuse a progress callback that cannot be called.

    Raises:
        InvalidInput: ``value`` is neither ``None`` nor callable.
    """
    if value is not None and not callable(value):
        raise InvalidInput(f"{field} must be a function, got {_shown(value)}")


def clean_paths(values: object, field: str) -> list[str | Path] | None:
    """File or directory arguments: ``None`` (the default place), one path or a list of them.

    Raises:
        InvalidInput: an item is not a path or text, is empty, or holds a NUL character.
    """
    if values is None:
        return None
    items = [values] if isinstance(values, str | os.PathLike) else clean_seq(values, field)
    out: list[str | Path] = []
    for raw in items:
        if not isinstance(raw, str | os.PathLike):
            raise InvalidInput(f"{field} must be file paths, got {_shown(raw)}")
        text = os.fspath(raw)
        if not isinstance(text, str) or not text.strip() or "\x00" in text:
            raise InvalidInput(f"{field} must be file paths, got {_shown(raw)}")
        try:
            encoded = text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInput(f"{field} must be file paths, got {_shown(raw)}") from None
        # The kernel's own limits (NAME_MAX, PATH_MAX): beyond them every look-up fails.
        if len(encoded) > 4096 or any(len(part) > 255 for part in encoded.split(b"/")):
            raise InvalidInput(f"{field} {_shown(raw)} is longer than a path can be")
        try:
            Path(text).expanduser()
        except RuntimeError:  # "~name/…" for a user this machine does not know
            raise InvalidInput(f"{field} {_shown(raw)} names an unknown home directory") from None
        out.append(raw if isinstance(raw, str) else Path(text))
    return out


def _shown(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__ must not replace the real error
        text = f"<{type(value).__name__}>"
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 60 else text[:57] + "..."


def clean_ids(values: object, field: str, cap: int) -> tuple[int, ...]:
    """Validate a list of integer ids (source_links, memory ids); duplicates dropped.

    Raises:
        InvalidInput: not a list, or an item is not a positive integer id.
        InputTooLarge: more than ``cap`` items.
    """
    if values is None:
        return ()
    items = clean_seq(values, field)
    if len(items) > cap:
        raise InputTooLarge(f"{field} has {len(items)} items; the cap is {cap}")
    out: list[int] = []
    for raw in items:
        ident = clean_int(raw, f"{field} items", lo=1)
        if ident not in out:
            out.append(ident)
    return tuple(out)


def clean_weight(value: object, field: str) -> int:
    """Validate one of the four 1–5 weights.

    An integer like every other (:func:`clean_int`): ``3.0`` is refused as MCP refuses
    it (:mod:`tideline.mcp.arguments`), one rule on every surface.

    Raises:
        InvalidInput: not an integer in 1..5.
    """
    return clean_int(value, field, lo=1, hi=5)


_YEAR_IN_TEXT = re.compile(r"(?<!\d)(?:1[89]|2\d)\d\d(?!\d)")


def _written_date(text: str) -> datetime | None:
    """A date written out in words or with slashes, or None (see :func:`parse_time`)."""
    if len(text) > 100 or not _YEAR_IN_TEXT.search(text):
        return None
    from dateutil import parser  # only needed for imports that carry written dates

    try:
        parsed: datetime = parser.parse(text, default=datetime(2000, 1, 1))
    except (ValueError, OverflowError, parser.ParserError):
        return None
    return parsed


def parse_time(value: object, field: str = "time") -> float | None:
    """Accept epoch seconds, ISO 8601 text, a written date or a datetime; ``None`` stays.

    Written dates as exports carry them are read too ("1:56 pm on 8 May, 2023",
    "May 8, 2023 13:56", "2023/05/08", "Mon, 08 May 2023 13:56:00 GMT") as long as
    they name a four-digit year, so a stray number is never taken for a date. Times
    without a zone are local time, like naive ISO 8601. Whatever the form, the
    instant must lie between year 1 and 9999 in UTC (see :mod:`tideline.times`).

    Raises:
        InvalidInput: the value cannot be read as a time, or is not a real instant
            in that range (NaN, infinite, ``1e20``, an offset of 24 hours or more).
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{field} must be a time")
    if isinstance(value, int | float):
        return check_epoch(value, field)
    if isinstance(value, datetime):
        return check_datetime(value, field)
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return check_epoch(number, field)
        parsed: datetime | None
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            parsed = _written_date(text)
        if parsed is None:
            raise InvalidInput(
                f"{field} {value[:80]!r} is not a date: use ISO 8601 (2024-05-08T13:56), "
                f"epoch seconds or a written date with its year")
        return check_datetime(parsed, field)
    raise InvalidInput(f"{field} must be a time, got {type(value).__name__}")
