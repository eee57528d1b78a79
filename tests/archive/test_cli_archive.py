"""Issue 11 through the CLI: export, import tideline, migrate (JSON, exit codes, errors).

The round trip runs on both backends (tests/backend.py): on PostgreSQL the exported store
is the database of ``TIDELINE_DATABASE_URL``, the import goes into another database
(``--database``), and migrate moves the database into a directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.backend import Backend

pytestmark = pytest.mark.backends


def run(*args: str, embedder: str | None = "hashing", code: int = 0,
        env_url: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("TIDELINE_EMBEDDER", None)
    if not env_url:  # the SQLite directory named, whatever the test's backend is
        env.pop("TIDELINE_DATABASE_URL", None)
    if embedder:
        env["TIDELINE_EMBEDDER"] = embedder
    proc = subprocess.run([sys.executable, "-m", "tideline", *args], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == code, proc.stderr
    return proc


def test_cli_export_import_migrate(tmp_path: Path, backend: Backend) -> None:
    a, b, c = (str(tmp_path / n) for n in "ABC")
    fresh = backend.fresh()  # B: a second empty store (another database on PostgreSQL)
    into_b = ("--store", b) if fresh is None else ("--store", b, "--database", fresh)
    run("remember", "atlas uses PostgreSQL 16 on pg-atlas-01", "--scope", "atlas", "--store", a)
    run("remember", "Ana prefers tea", "--store", a)
    archive = tmp_path / "a.jsonl"
    exp = json.loads(run("export", str(archive), "--store", a, "--json").stdout)
    assert exp["counts"]["memories"] == 2 and len(exp["sha256"]) == 64
    # A fresh target takes the archive's embedder (no TIDELINE_EMBEDDER, no --embedder).
    imp = json.loads(run("import", "tideline", str(archive), *into_b, "--json",
                         embedder=None).stdout)
    assert imp["inserted"]["memories"] == 2 and imp["already_imported"] is False
    again = run("import", "tideline", str(archive), *into_b, embedder=None)
    assert "already imported" in again.stdout
    rec = json.loads(run("recall", "pg-atlas-01", "--scope", "atlas", *into_b,
                         "--json", embedder=None).stdout)
    assert rec["items"] and "pg-atlas-01" in rec["items"][0]["text"]
    mig = json.loads(run("migrate", "--to", c, "--store", a, "--json").stdout)
    assert mig["verified"] is True and mig["rows"] == exp["rows"]
    copied = json.loads(run("recall", "Ana tea", "--store", c, "--json", embedder=None,
                            env_url=False).stdout)
    assert copied["items"] and "tea" in copied["items"][0]["text"]
    if fresh is not None:  # the data lived in the databases, never in the local directories
        assert not (tmp_path / "A" / "tideline.db").exists()
        assert not (tmp_path / "B" / "tideline.db").exists()
    md = json.loads(run("export", str(tmp_path / "md"), "--format", "markdown", "--store", a,
                        "--json").stdout)
    assert md["memories"] == 2 and (tmp_path / "md" / "index.md").is_file()


def test_cli_errors_are_one_line_with_their_codes(tmp_path: Path) -> None:
    a = str(tmp_path / "A")
    run("remember", "Ana prefers tea", "--store", a)
    archive = tmp_path / "a.jsonl"
    run("export", str(archive), "--store", a)
    bad = run("migrate", "--to", "postgresql://127.0.0.1:1/tideline", "--store", a, code=15)
    assert bad.stderr.startswith("tideline: error: backend_unavailable:")
    assert bad.stderr.count("\n") == 1
    tampered = tmp_path / "t.jsonl"
    tampered.write_text(archive.read_text("utf-8").replace("tea", "rum"), encoding="utf-8")
    err = run("import", "tideline", str(tampered), "--store", str(tmp_path / "F"), code=7)
    assert "archive_invalid" in err.stderr and "sha256" in err.stderr
    held = json.loads(run("introspect", "--store", str(tmp_path / "F"), "--json").stdout)
    assert held["memories"] == 0 and held["turns"] == 0
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "elsewhere.jsonl")
    err = run("export", str(link), "--store", a, code=8)
    assert "unsafe_path" in err.stderr and not (tmp_path / "elsewhere.jsonl").exists()
