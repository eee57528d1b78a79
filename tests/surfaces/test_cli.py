"""The CLI as a user runs it: real subprocesses, JSON contract, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, store: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store)],
                          capture_output=True, text=True, env=env, timeout=120)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def j(proc: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(proc.stdout)


def test_cli_contract(tmp_path: Path) -> None:
    store = tmp_path / "s"
    run("init", store=store)
    first = j(run("remember", "atlas uses PostgreSQL 16 on pg-atlas-01", "--scope", "atlas",
                  "--json", store=store))
    assert first["decision"] == "new" and isinstance(first["id"], int)
    again = j(run("remember", "atlas uses PostgreSQL 16 on pg-atlas-01.", "--scope", "atlas",
                  "--json", store=store))
    assert again["decision"] == "potentiate" and again["id"] == first["id"]
    chat = tmp_path / "chat.jsonl"
    chat.write_text("\n".join(json.dumps(r) for r in [
        {"session": "s1", "role": "user", "text": "error E1234 in the loader",
         "timestamp": "2026-11-20T09:00:00Z", "id": "m-1"},
        {"session": "s1", "speaker": "agent", "text": "a new CSV column caused it",
         "timestamp": "2026-11-20T09:01:00Z", "id": "m-2"},
    ]) + "\n", encoding="utf-8")
    imp = j(run("turns", "import", str(chat), "--scope", "atlas", "--json", store=store))
    assert imp["inserted"] == 2
    assert j(run("turns", "import", str(chat), "--scope", "atlas", "--json",
                 store=store))["inserted"] == 0
    rec = j(run("recall", "E1234", "--scope", "atlas", "--limit", "3", "--json", store=store))
    assert rec["abstained"] is False
    turn = next(i for i in rec["items"] if i["type"] == "turn")
    assert turn["id"] == "m-1" and turn["session"] == "s1"
    assert {"id", "text", "confidence", "source"} <= set(rec["items"][0])
    other = j(run("recall", "E1234", "--scope", "orchard", "--json", store=store))
    assert all(i["scope"] in ("orchard", "global") for i in other["items"])
    j(run("write", "we chose PgBouncer session mode", "--context", "standup", "--kind",
          "decision", "--scope", "atlas", "--importance", "4", "--json", store=store))
    kinds = j(run("recall", "PgBouncer", "--scope", "atlas", "--kind", "decision", "--json",
                  store=store))
    assert kinds["items"] and all(i["kind"] == "decision" for i in kinds["items"])
    j(run("recall", "PgBouncer", "--since", "2020-01-01", "--until", "2100-01-01", "--json",
          store=store))
    j(run("reflect", str(first["id"]), "--reward", "0.5", "--scope", "atlas", "--json",
          store=store))
    revised = j(run("revise", str(first["id"]), "atlas uses PostgreSQL 17", "--scope", "atlas",
                    "--json", store=store))
    shown = j(run("show", str(revised["id"]), "--scope", "atlas", "--json", store=store))
    assert shown["history"][0]["id"] == first["id"]
    hidden = run("show", str(revised["id"]), "--scope", "orchard", store=store, ok=False)
    assert hidden.returncode == 5 and "not_found" in hidden.stderr  # as if it did not exist
    j(run("forget", str(revised["id"]), "--scope", "atlas", "--json", store=store))
    info = j(run("introspect", "--all-scopes", "--json", store=store))
    assert info["turns"] == 2 and "atlas" in info["scopes"]
    doc = j(run("doctor", "--json", store=store))
    assert doc["ok"] is True
    human = run("recall", "E1234", "--scope", "atlas", store=store)
    assert "E1234" in human.stdout


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["show", "999"], 5),
        (["remember", "x", "--importance", "9"], 3),
        (["recall", "x", "--limit", "100000"], 4),
        (["turns", "import", "/nonexistent.jsonl"], 5),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, args: list[str], code: int) -> None:
    proc = run(*args, store=tmp_path / "s", ok=False)
    assert proc.returncode == code
    assert proc.stderr.startswith("tideline: error:") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


def test_cli_malformed_jsonl(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok", "id": "1"}\nnot json\n', encoding="utf-8")
    proc = run("turns", "import", str(bad), store=tmp_path / "s", ok=False)
    assert proc.returncode == 3 and ":2:" in proc.stderr


def test_cli_embedder_mismatch(tmp_path: Path) -> None:
    store = tmp_path / "s"
    run("init", store=store)
    env = dict(os.environ, TIDELINE_EMBEDDER="e5")
    proc = subprocess.run([sys.executable, "-m", "tideline", "recall", "x", "--store",
                           str(store)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 20 and "hashing" in proc.stderr and "e5" in proc.stderr


def test_version_names_the_distribution() -> None:
    """Issue 10 item 2: `pip install tideline` installs someone else's project and there is
    no `tideline --version`. The distribution is `tideline-memory`; the version comes from
    its metadata and agrees with `tideline.__version__`."""
    from importlib.metadata import distribution

    import tideline

    dist = distribution("tideline-memory")
    assert dist.version == tideline.__version__
    assert dist.entry_points.select(group="console_scripts", name="tideline")
    assert not dist.entry_points.select(group="hermes_agent.memory_providers")
    proc = subprocess.run([sys.executable, "-m", "tideline", "--version"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"tideline-memory {tideline.__version__}\n"
