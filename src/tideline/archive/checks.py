"""What an archived row must hold before it is loaded, and the redaction it gets.

An archive is a file anyone can write, so import checks it as the write path checks
what it is given, row by row, before anything is written (a refusal leaves the store
as it was):

- **One namespace.** An archive of one namespace (its header names it) holds rows of
  that namespace only: a row of another namespace, or a vector of another namespace's
  space, is refused.
- **One schema.** The archived ``db_meta`` ``schema_version`` is the header's, and no
  newer than this Tideline's.
- **Ranges.** Every id and every reference to one is a positive integer (a memory
  ``-5`` could never be forgotten); every time is a real instant
  (:func:`tideline.times.time_in_range`); a memory's weight and strength lie in 0–1, its
  stability is positive, its counters are not negative; every real is finite.
- **Redaction.** Texts pass the write path's secret redaction
  (:func:`tideline.secrets.redact_secrets`, JSON columns :func:`tideline.secrets.redact_json`),
  so an archive cannot bring a credential in clear. Columns that identify a row
  (namespace, scope, session, message id, idempotency key, entity name) are kept as
  they are: redacting them could make two rows one.

Everything raises :class:`~tideline.errors.ArchiveInvalid`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from tideline.errors import ArchiveInvalid
from tideline.secrets import find_secrets, redact_json, redact_secrets
from tideline.times import time_in_range

__all__ = ["ID_LISTS", "REFERENCES", "check_row", "redact_row"]

#: Columns that refer to a row of another table (table, column) → the table.
REFERENCES: dict[tuple[str, str], str] = {
    ("memories", "supersedes"): "memories",
    ("edges", "src"): "memories", ("edges", "dst"): "memories",
    ("write_keys", "memory_id"): "memories", ("write_keys", "nearest"): "memories",
    ("memory_keywords", "memory_id"): "memories",
    ("events", "memory_id"): "memories",
    ("attention_log", "memory_id"): "memories", ("attention_log", "cluster"): "emb_clusters",
    ("eligibility", "recall_id"): "events", ("eligibility", "memory_id"): "memories",
    ("topic_members", "cluster_id"): "topic_clusters",
    ("topic_members", "memory_id"): "memories",
    ("emb_members", "memory_id"): "memories", ("emb_members", "cluster_id"): "emb_clusters",
    ("emb_adjacency", "a"): "emb_clusters", ("emb_adjacency", "b"): "emb_clusters",
}
#: JSON columns holding a list of ids of a table: (table, column) → the table.
ID_LISTS: dict[tuple[str, str], str] = {
    ("memories", "source_links"): "turns",
    ("threads", "source_memories"): "memories",
    ("entity_nodes", "memories"): "memories",
}
_TIMES = frozenset({"ts", "recorded_at", "updated_at", "last_access", "event_time",
                    "created_at", "built_at"})
_UNIT = (("memories", "weight"), ("memories", "strength"))
_NOT_NEGATIVE = (("memories", "reinforcements"), ("turns", "turn_index"),
                 ("edges", "weight"), ("topic_clusters", "size"), ("emb_clusters", "size"))
_AT_LEAST_ONE = (("memories", "version"), ("profiles", "version"),
                 ("self_concept", "version"), ("memory_keywords", "version"))
# Texts redacted on the way in; the JSON ones hold lists or objects of texts.
_REDACT: dict[str, tuple[str, ...]] = {
    "memories": ("gesture", "context", "cognition_direction", "entities_role"),
    "turns": ("speaker", "text"),
    "profiles": ("content",),
    "self_concept": ("content",),
    "threads": ("title", "body"),
    "topic_clusters": ("label",),
    "emb_clusters": ("label",),
}
_REDACT_JSON: dict[str, tuple[str, ...]] = {
    "memories": ("tags", "related_entities"),
    "events": ("data",),
    "memory_keywords": ("keywords",),
    "topic_clusters": ("keywords",),
    "emb_clusters": ("keywords",),
    "entity_nodes": ("roles",),
    "entity_edges": ("role_pairs",),
    "sleep_state": ("value",),
}


def _is_id(table: str, column: str) -> bool:
    return (column == "id" or (table, column) in REFERENCES
            or (table == "vectors" and column == "key"))


def _check_number(table: str, column: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ArchiveInvalid(f"{table}.{column} is not a finite number")
    if _is_id(table, column) and value <= 0:
        raise ArchiveInvalid(f"{table}.{column} must be a positive id, got {value!r}")
    if column in _TIMES and not time_in_range(value):
        raise ArchiveInvalid(f"{table}.{column} is not a real instant: {value!r}")
    if (table, column) in _UNIT and not 0.0 <= value <= 1.0:
        raise ArchiveInvalid(f"{table}.{column} must lie in 0–1, got {value!r}")
    if (table, column) in _NOT_NEGATIVE and value < 0:
        raise ArchiveInvalid(f"{table}.{column} may not be negative, got {value!r}")
    if (table, column) in _AT_LEAST_ONE and value < 1:
        raise ArchiveInvalid(f"{table}.{column} must be at least 1, got {value!r}")
    if table == "memories" and column == "stability" and not value > 0:
        raise ArchiveInvalid(f"memories.stability must be positive, got {value!r}")


def _check_ids(table: str, column: str, value: Any) -> None:
    if not isinstance(value, str):
        return  # the column check refuses the type
    try:
        ids = json.loads(value)
    except (ValueError, RecursionError):
        raise ArchiveInvalid(f"{table}.{column} must hold JSON") from None
    if not isinstance(ids, list) or not all(
            type(i) is int and 0 < i < 2**63 for i in ids):
        raise ArchiveInvalid(f"{table}.{column} must be a list of positive ids")


def _check_namespace(table: str, row: Mapping[str, Any], namespace: str) -> None:
    ns = row.get("namespace")
    if ns is not None and ns != namespace:
        raise ArchiveInvalid(f"a {table} row of namespace {str(ns)[:80]!r} in an archive "
                             f"of namespace {namespace[:80]!r}")
    space = row.get("space")
    if table == "vectors" and isinstance(space, str) and not any(
            space.startswith(f"{kind}:{namespace}:") for kind in "mts"):
        raise ArchiveInvalid(f"a vector of space {space[:80]!r} in an archive of "
                             f"namespace {namespace[:80]!r}")


def _check_schema(row: Mapping[str, Any], header_schema: int, known: int) -> None:
    if row.get("key") != "schema_version":
        return
    value = row.get("value")
    if not isinstance(value, str) or not value.isdecimal() or len(value) > 9:
        raise ArchiveInvalid(f"the archived schema version {str(value)[:20]!r} is not one")
    version = int(value)
    if version != header_schema or not 1 <= version <= known:
        raise ArchiveInvalid(f"the archived schema version {version} is not the header's "
                             f"({header_schema}) or is unknown here (this Tideline knows "
                             f"1–{known})")


def check_row(table: str, row: Mapping[str, Any], *, namespace: str | None,
              header_schema: int, known_schema: int) -> None:
    """Refuse a row an archive may not bring (see the module's rules).

    Args:
        table: the row's table.
        row: ``{column: value}`` as decoded.
        namespace: the header's namespace (None: an archive of a whole store).
        header_schema: the header's schema version.
        known_schema: the newest schema this Tideline knows.

    Raises:
        ArchiveInvalid: another namespace's row, a schema version that is not the
            header's, an id that is not positive, an impossible time, a value out of range.
    """
    if namespace is not None:
        _check_namespace(table, row, namespace)
    if table == "db_meta":
        _check_schema(row, header_schema, known_schema)
        return
    for column, value in row.items():
        if isinstance(value, bool):
            continue  # the column check refuses it
        if isinstance(value, int | float):
            _check_number(table, column, value)
        elif (table, column) in ID_LISTS:
            _check_ids(table, column, value)


def _redact_json_text(value: str) -> str:
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # a sleep-state value may be plain text
        return redact_secrets(value)[0] if find_secrets(value) else value
    redacted = redact_json(parsed)
    # A clean value stays byte for byte as it was (the archive's digest holds).
    return value if json.loads(redacted) == parsed else redacted


def redact_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the write path's secret redaction applied to its texts.

    A row without a secret is returned unchanged (the same object).
    """
    changed: dict[str, Any] = {}
    for column in _REDACT.get(table, ()):
        value = row.get(column)
        if isinstance(value, str) and find_secrets(value):
            changed[column] = redact_secrets(value)[0]
    for column in _REDACT_JSON.get(table, ()):
        value = row.get(column)
        if isinstance(value, str) and value not in ("[]", "{}"):
            new = _redact_json_text(value)
            if new != value:
                changed[column] = new
    return row | changed if changed else row
