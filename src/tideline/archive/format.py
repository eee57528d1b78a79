"""The portable archive: versioned JSONL, one line per row, verified end to end.

Layout (UTF-8, one JSON object per line)::

    {"format": "tideline-archive", "version": 1, "tideline": …, "schema_version": …,
     "embedder": "name:model/dim", "namespace": "default" | null, "vectors": true,
     "created_at": "2026-12-01T10:00:00Z", "counts": {"memories": 12, …}}
    {"t": "memories", "r": {"id": 1, "namespace": "default", "gesture": "…", …}}
    …                                             (tables in the order of TABLES)
    {"end": "tideline-archive", "counts": {…}, "sha256": "<hex of every row line>"}

Values are JSON scalars; a binary value (a vector, a centroid) is ``{"b64": "…"}`` with
little-endian float32 inside. The trailer's sha256 covers every row line with its
newline, so a truncated or edited body is refused; the header's counts must agree with
it. Nothing in this module knows SQL: rows are ``{column: value}`` mappings.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from tideline.errors import ArchiveInvalid, InputTooLarge, SchemaTooNew

__all__ = ["FORMAT", "FORMAT_VERSION", "MAX_LINE_BYTES", "TABLES", "ArchiveReader",
           "BodyWriter", "Header", "Sink", "decode_row", "encode_row"]

#: The archive's format name, the first field of its header line.
FORMAT = "tideline-archive"
#: The format version this Tideline writes (and the newest it reads).
FORMAT_VERSION = 1
# One row per line: a memory at its field caps, or a 4096-dim vector in base64, fits well.
MAX_LINE_BYTES = 8 * 2**20
# In load order: rows refer only to rows of earlier tables (or of their own).
TABLES = (
    "db_meta", "memories", "turns", "edges", "vectors", "write_keys", "memory_keywords",
    "events", "profiles", "self_concept", "threads", "attention_log", "eligibility",
    "sleep_state", "topic_clusters", "topic_members", "emb_clusters", "emb_members",
    "emb_adjacency", "entity_nodes", "entity_edges", "retention_snapshots",
)
# Derived from the vectors of one embedder: dropped when an import re-embeds.
EMBEDDING_TABLES = frozenset({"vectors", "emb_clusters", "emb_members", "emb_adjacency"})
_HEADER_KEYS = {"format", "version", "tideline", "schema_version", "embedder", "namespace",
                "vectors", "created_at", "counts"}


@dataclass(frozen=True)
class Header:
    """The first line of an archive."""

    tideline: str
    schema_version: int
    embedder: str
    namespace: str | None
    vectors: bool
    created_at: str
    counts: dict[str, int]
    version: int = FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """The header line's object."""
        return {"format": FORMAT, "version": self.version, "tideline": self.tideline,
                "schema_version": self.schema_version, "embedder": self.embedder,
                "namespace": self.namespace, "vectors": self.vectors,
                "created_at": self.created_at, "counts": self.counts}


def _dumps(obj: Any) -> bytes:
    try:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
                + "\n").encode("utf-8")
    except (ValueError, UnicodeEncodeError) as exc:
        raise ArchiveInvalid(f"a stored value cannot be archived: {exc}") from None


def encode_row(table: str, row: dict[str, Any]) -> bytes:
    """One row line (bytes, newline included)."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        out[k] = {"b64": base64.b64encode(v).decode("ascii")} if isinstance(v, bytes) else v
    return _dumps({"t": table, "r": out})


class Sink(Protocol):
    """Where archive bytes go (a file, or nowhere when only the digest is wanted)."""

    def write(self, data: bytes, /) -> int:
        """Write bytes."""


class BodyWriter:
    """Writes header, rows and trailer to a binary stream, hashing the body.

    Args:
        out: the binary stream.
        header: the header (its counts are what the rows must add up to).
    """

    def __init__(self, out: Sink, header: Header) -> None:
        self.out = out
        self.header = header
        self.counts: dict[str, int] = dict.fromkeys(header.counts, 0)
        self.sha = hashlib.sha256()
        out.write(_dumps(header.to_dict()))

    def row(self, table: str, row: dict[str, Any]) -> None:
        """Append one row of ``table``."""
        line = encode_row(table, row)
        self.sha.update(line)
        self.out.write(line)
        self.counts[table] = self.counts.get(table, 0) + 1

    def close(self) -> str:
        """Write the trailer; returns the body's sha256.

        Raises:
            ArchiveInvalid: the rows written do not add up to the header's counts
                (the store changed under a reader that was not a snapshot).
        """
        if self.counts != self.header.counts:
            raise ArchiveInvalid("rows written differ from the counts in the header")
        digest = self.sha.hexdigest()
        self.out.write(_dumps({"end": FORMAT, "counts": self.counts, "sha256": digest}))
        return digest


def _no_constants(name: str) -> Any:
    raise ArchiveInvalid(f"{name} is not a number an archive may hold")


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ArchiveInvalid(f"duplicate key {k!r}")
        out[k] = v
    return out


def _check_text(s: str, where: str) -> None:
    if "\x00" in s:
        raise ArchiveInvalid(f"NUL character in {where}")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise ArchiveInvalid(f"lone surrogate in {where}") from None


def _parse(raw: bytes, lineno: int) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ArchiveInvalid(f"line {lineno} is not UTF-8") from None
    try:
        obj = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constants)
    except ArchiveInvalid as exc:
        raise ArchiveInvalid(f"line {lineno}: {exc}") from None
    except ValueError as exc:
        raise ArchiveInvalid(f"line {lineno} is not JSON: {exc}") from None
    except RecursionError:  # nesting deeper than the parser's stack: no archive row is
        raise ArchiveInvalid(f"line {lineno} is nested too deeply") from None
    if not isinstance(obj, dict):
        raise ArchiveInvalid(f"line {lineno} is not a JSON object")
    return obj


def decode_row(obj: dict[str, Any], lineno: int,
               escapes: bool = True) -> tuple[str, dict[str, Any]]:
    """``(table, {column: value})`` of a row line's object, every value checked.

    ``escapes=False`` says the line held no ``\\u`` escape: a valid UTF-8 line without one
    cannot spell a NUL or a lone surrogate, so the per-string scan is skipped.

    Raises:
        ArchiveInvalid: not a row, an unknown table, or a value an archive may not hold.
    """
    if set(obj) != {"t", "r"} or not isinstance(obj["r"], dict):
        raise ArchiveInvalid(f"line {lineno} is not a row")
    table = obj["t"]
    if table not in TABLES:
        raise ArchiveInvalid(f"line {lineno}: unknown table {table!r}")
    row: dict[str, Any] = {}
    for k, v in obj["r"].items():
        if escapes:
            _check_text(k, f"a column name on line {lineno}")
        if isinstance(v, dict):
            b64 = v.get("b64")
            if set(v) != {"b64"} or not isinstance(b64, str):
                raise ArchiveInvalid(f"line {lineno}: {k} holds an object")
            try:
                row[k] = base64.b64decode(b64, validate=True)
            except ValueError:
                raise ArchiveInvalid(f"line {lineno}: {k} is not base64") from None
        elif isinstance(v, bool) or isinstance(v, list):
            raise ArchiveInvalid(f"line {lineno}: {k} holds a {type(v).__name__}")
        else:
            if escapes and isinstance(v, str):
                _check_text(v, f"{table}.{k} on line {lineno}")
            row[k] = v
    return table, row


def _header(obj: dict[str, Any], schema_version: int) -> Header:
    if obj.get("format") != FORMAT:
        raise ArchiveInvalid("not a Tideline archive (the first line names no "
                             f"{FORMAT!r} format)")
    if obj.get("version") != FORMAT_VERSION:
        raise ArchiveInvalid(f"archive format version {obj.get('version')!r}; this Tideline "
                             f"reads version {FORMAT_VERSION}")
    if set(obj) != _HEADER_KEYS:
        raise ArchiveInvalid("the archive header has missing or unknown fields")
    counts = obj["counts"]
    unknown = [k for k in counts if k not in TABLES] if isinstance(counts, dict) else []
    if unknown:
        raise ArchiveInvalid(f"unknown table {unknown[0]!r} in the archive header")
    ok = (isinstance(obj["schema_version"], int) and isinstance(obj["embedder"], str)
          and isinstance(obj["tideline"], str) and isinstance(obj["created_at"], str)
          and isinstance(obj["vectors"], bool)
          and (obj["namespace"] is None or isinstance(obj["namespace"], str))
          and isinstance(counts, dict)
          and all(k in TABLES and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                  for k, v in counts.items()))
    if not ok:
        raise ArchiveInvalid("the archive header has a field of the wrong type")
    for s in (obj["embedder"], obj["namespace"] or "", obj["tideline"]):
        _check_text(s, "the header")
    if obj["schema_version"] > schema_version:
        raise SchemaTooNew(f"archive of schema {obj['schema_version']}; this Tideline knows "
                           f"up to {schema_version}")
    return Header(tideline=obj["tideline"], schema_version=obj["schema_version"],
                  embedder=obj["embedder"], namespace=obj["namespace"], vectors=obj["vectors"],
                  created_at=obj["created_at"], counts=counts)


@dataclass
class ArchiveReader:
    """Reads and verifies an archive file.

    :meth:`verify` checks everything (structure, values, counts, sha256) before
    anything is loaded; :meth:`rows` then streams the rows and checks the sha256 once
    more at the end, so a file changed between the two passes is refused as well.

    Args:
        path: the archive.
        schema_version: the newest schema this Tideline knows.
        max_line: the longest line accepted, in bytes.
    """

    path: Path
    schema_version: int
    max_line: int = MAX_LINE_BYTES
    header: Header | None = None
    digest: str = ""
    collected: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Called with (header, table, row) for every row as it is read; may raise.
    check: Callable[[Header, str, dict[str, Any]], None] | None = None

    def _lines(self, f: IO[bytes]) -> Iterator[tuple[int, bytes]]:
        lineno = 0
        while True:
            raw = f.readline(self.max_line + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > self.max_line:
                raise InputTooLarge(f"line {lineno} of the archive is over "
                                    f"{self.max_line} bytes")
            if not raw.endswith(b"\n"):
                raise ArchiveInvalid(f"line {lineno} has no line end: the archive is "
                                     "truncated")
            yield lineno, raw

    def _open(self) -> IO[bytes]:
        from tideline.archive.paths import open_regular

        try:
            return open_regular(self.path)
        except FileNotFoundError:
            from tideline.errors import NotFound

            raise NotFound(f"no archive at {self.path}") from None
        except OSError as exc:
            raise ArchiveInvalid(f"cannot read {self.path}: {exc}") from None

    def read_header(self) -> Header:
        """Only the header (for choosing an embedder before verifying).

        Raises:
            ArchiveInvalid: the first line is not a valid header.
            SchemaTooNew: written by a newer Tideline schema.
        """
        with self._open() as f:
            for lineno, raw in self._lines(f):
                return _header(_parse(raw, lineno), self.schema_version)
        raise ArchiveInvalid("the archive is empty")

    def body_digest(self) -> str | None:
        """The sha256 of the row lines when it equals the trailer's claim, else None.

        One cheap pass (no JSON parsing): enough to recognise an archive that was fully
        verified and imported before, since the import records this digest.

        Raises:
            InputTooLarge: a line over the cap.
        """
        sha = hashlib.sha256()
        previous: bytes | None = None
        with self._open() as f:
            for lineno, raw in self._lines(f):
                if lineno > 2 and previous is not None:
                    sha.update(previous)
                previous = raw if lineno > 1 else None
        if previous is None:
            return None
        try:
            claimed = json.loads(previous).get("sha256")
        except (ValueError, AttributeError, RecursionError):
            return None
        return claimed if claimed == sha.hexdigest() else None

    def _walk(self, collect: frozenset[str]) -> Iterator[tuple[str, dict[str, Any]]]:
        sha = hashlib.sha256()
        counts: dict[str, int] = {}
        last_table = -1
        header: Header | None = None
        trailer: dict[str, Any] | None = None
        with self._open() as f:
            for lineno, raw in self._lines(f):
                obj = _parse(raw, lineno)
                if header is None:
                    header = _header(obj, self.schema_version)
                    counts = dict.fromkeys(header.counts, 0)
                    continue
                if trailer is not None:
                    raise ArchiveInvalid(f"line {lineno} follows the trailer")
                if "end" in obj:
                    trailer = obj
                    continue
                table, row = decode_row(obj, lineno, b"\\u" in raw)
                index = TABLES.index(table)
                if index < last_table:
                    raise ArchiveInvalid(f"line {lineno}: table {table!r} out of order")
                last_table = index
                if table not in counts:
                    raise ArchiveInvalid(f"line {lineno}: table {table!r} is not in the header")
                if self.check is not None:
                    try:
                        self.check(header, table, row)
                    except ArchiveInvalid as exc:
                        raise ArchiveInvalid(f"line {lineno}: {exc}") from None
                sha.update(raw)
                counts[table] += 1
                if table in collect:
                    self.collected.setdefault(table, []).append(row)
                yield table, row
        if header is None:
            raise ArchiveInvalid("the archive is empty")
        if trailer is None:
            raise ArchiveInvalid("the archive has no trailer: it is truncated")
        if (set(trailer) != {"end", "counts", "sha256"} or trailer["end"] != FORMAT
                or trailer["counts"] != counts or header.counts != counts):
            raise ArchiveInvalid("the archive's row counts do not match its trailer/header")
        if trailer["sha256"] != sha.hexdigest():
            raise ArchiveInvalid("the archive's sha256 does not match its rows: it was "
                                 "changed or damaged")
        self.header = header
        self.digest = sha.hexdigest()

    def verify(self, collect: frozenset[str] = frozenset()) -> Header:
        """Read the whole archive and check it; keep the rows of ``collect`` tables.

        Raises:
            ArchiveInvalid: anything wrong in it (nothing has been written).
            InputTooLarge: a line over the cap.
            SchemaTooNew: written by a newer Tideline schema.
        """
        self.collected = {}
        for _ in self._walk(collect):
            pass
        assert self.header is not None  # noqa: S101 - _walk sets it or raises
        return self.header

    def rows(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every row again, after :meth:`verify`; raises at the end if the file changed.

        Raises:
            ArchiveInvalid: the file no longer matches what :meth:`verify` read.
        """
        expected = self.digest
        yield from self._walk(frozenset())
        if self.digest != expected:
            raise ArchiveInvalid("the archive changed while it was being imported")
