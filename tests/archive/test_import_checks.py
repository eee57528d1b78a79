"""Issue 33 items 4 (archive part), 9 and 11: archive import checks rows as the write path
does (namespace, schema, ids, times, ranges), redacts secrets, and hostile files are
typed errors; a refusal leaves the store unchanged (property-tested)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.archive.helpers import open_store, populate, rewrite
from tests.backend import rows

from tideline.archive.exchange import archive_digest
from tideline.errors import ArchiveInvalid

TOKEN = "ghp_" + "a1B2" * 9


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checks")
    with open_store(root / "A") as mem:
        populate(mem)
        mem.export(root / "a.jsonl")
    return root / "a.jsonl"


def _edit(archive: Path, tmp_path: Path, table: str, change: dict[str, Any],
          which: int = 0) -> Path:
    out = tmp_path / f"edited-{table}.jsonl"
    out.write_bytes(archive.read_bytes())

    def edit(header: dict[str, Any], rows_: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen = 0
        for r in rows_:
            if r["t"] == table:
                if seen == which:
                    r["r"].update(change)
                    break
                seen += 1
        return rows_

    rewrite(out, edit)
    return out


def _refused(path: Path, tmp_path: Path, match: str) -> None:
    with open_store(tmp_path / "B") as dest:
        dest.remember("B's own memory")
        before = archive_digest(dest.store)
        with pytest.raises(ArchiveInvalid, match=match):
            dest.import_archive(path)
        assert archive_digest(dest.store) == before


@pytest.mark.parametrize(("table", "change", "match"), [
    ("memories", {"namespace": "bravo"}, "namespace 'bravo'"),
    ("turns", {"namespace": "bravo"}, "namespace 'bravo'"),
    ("events", {"namespace": "bravo"}, "namespace 'bravo'"),
    ("vectors", {"space": "m:bravo:atlas"}, "space 'm:bravo:atlas'"),
    ("db_meta", {"value": "999"}, "schema version"),
    ("memories", {"id": 0}, "positive id"),
    ("memories", {"id": -5}, "positive id"),
    ("edges", {"dst": -5}, "positive id"),
    ("memories", {"event_time": 1e20}, "real instant"),
    ("turns", {"recorded_at": -1e15}, "real instant"),
    ("memories", {"weight": 7.5}, "0–1"),
    ("memories", {"strength": -0.1}, "0–1"),
    ("memories", {"stability": 0}, "positive"),
    ("memories", {"source_links": "[0]"}, "positive ids"),
])
def test_bad_rows_are_refused_and_nothing_is_written(archive: Path, tmp_path: Path,
                                                     table: str, change: dict[str, Any],
                                                     match: str) -> None:
    which = 0
    if table == "db_meta":  # the schema_version row
        lines = [json.loads(x) for x in archive.read_text("utf-8").splitlines()[1:-1]]
        keys = [r["r"]["key"] for r in lines if r["t"] == "db_meta"]
        which = keys.index("schema_version")
    _refused(_edit(archive, tmp_path, table, change, which), tmp_path, match)


def test_archive_import_redacts_secrets(archive: Path, tmp_path: Path) -> None:
    """A credential in an archived memory, turn or journal event is stored redacted."""
    path = tmp_path / "secret.jsonl"
    path.write_bytes(archive.read_bytes())

    def edit(header: dict[str, Any], rows_: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in rows_:
            if r["t"] == "memories":
                r["r"]["gesture"] += f" token {TOKEN}"
            elif r["t"] == "turns":
                r["r"]["text"] += f" GITHUB_TOKEN={TOKEN}"
            elif r["t"] == "events":
                r["r"]["data"] = json.dumps({"note": f"key {TOKEN}"})
        return rows_

    rewrite(path, edit)
    with open_store(tmp_path / "B") as dest:
        dest.import_archive(path)
        stored = json.dumps([rows(dest, f"SELECT * FROM {t}")  # noqa: S608
                             for t in ("memories", "turns", "events")], default=str)
        assert TOKEN not in stored
        assert "[REDACTED:" in stored


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(table=st.sampled_from(["memories", "turns", "edges", "events", "attention_log",
                              "eligibility", "threads", "write_keys"]),
       column=st.sampled_from(["id", "memory_id", "src", "dst", "recall_id", "ts",
                               "recorded_at", "created_at", "namespace", "weight"]),
       value=st.one_of(st.integers(-2**40, 0), st.sampled_from([1e19, -1e19, 2.0]),
                       st.sampled_from(["bravo", "default2"])))
def test_any_bad_value_is_refused_or_harmless(archive: Path, table: str, column: str,
                                              value: Any) -> None:
    """Property: an id ≤ 0, an impossible time, a weight out of 0–1 or another namespace in
    any row is refused with archive_invalid, and the store is unchanged; an edit that
    does not apply to that column loads (or is refused for its type) — never half."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        lines = [json.loads(x) for x in archive.read_text("utf-8").splitlines()[1:-1]]
        has = any(r["t"] == table and column in r["r"] for r in lines)
        path = _edit(archive, root, table, {column: value}) if has else archive
        with open_store(root / "B") as dest:
            dest.remember("B's own memory")
            before = archive_digest(dest.store)
            bad_id = column in ("id", "memory_id", "src", "dst", "recall_id") and \
                isinstance(value, int) and value <= 0
            bad_time = column in ("ts", "recorded_at", "created_at") and \
                isinstance(value, float) and abs(value) > 1e12
            bad_ns = column == "namespace" and isinstance(value, str)
            bad_weight = table == "memories" and column == "weight" and value == 2.0
            try:
                dest.import_archive(path)
            except ArchiveInvalid:
                assert archive_digest(dest.store) == before
                return
            assert not (has and (bad_id or bad_time or bad_ns or bad_weight)), \
                (table, column, value)


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    return subprocess.run([sys.executable, "-m", "tideline", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, check=False)


def test_hostile_files_are_typed_errors(archive: Path, tmp_path: Path) -> None:
    """A 5,000-digit timestamp and JSON nested 100,000 deep: typed errors, never exit 70."""
    store = str(tmp_path / "S")
    big = tmp_path / "big.jsonl"
    big.write_text('{"session":"s","role":"user","text":"hi","timestamp":'
                   + "9" * 5000 + "}\n", "utf-8")
    out = _cli("import", "jsonl", str(big), "--store", store)
    assert out.returncode == 3 and "invalid_input" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    deep = tmp_path / "deep.jsonl"
    head = archive.read_text("utf-8").splitlines()[0]
    deep.write_text(head + "\n" + '{"t":"memories","r":' + "[" * 100_000 + "]" * 100_000
                    + "}\n", "utf-8")
    out = _cli("import", "tideline", str(deep), "--store", store)
    assert out.returncode == 7 and "archive_invalid" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    digits = tmp_path / "digits.jsonl"
    digits.write_text(head + "\n" + '{"t":"memories","r":{"id":' + "7" * 5000 + "}}\n",
                      "utf-8")
    out = _cli("import", "tideline", str(digits), "--store", store)
    assert out.returncode == 7 and "archive_invalid" in out.stderr, out.stderr
