"""`tideline import jsonl` (alias `tideline turns import`): any length, streamed, resumable.

Issue 9, items 3 and 4: a file over 10,000 lines was refused whole; parallel imports gave
one index to several turns. Real processes, a real SQLite file, the hashing embedder.

SQLite only (tests/backend.py): it reads the file read-only while imports write it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Caps, Config
from tideline.errors import InputTooLarge, InvalidInput

CLI = [sys.executable, "-m", "tideline"]


def _env() -> dict[str, str]:
    return dict(os.environ, TIDELINE_EMBEDDER="hashing", OMP_NUM_THREADS="1")


def _export(path: Path, n: int, sessions: int = 3, tag: str = "",
            t0: int = 1_700_000_000) -> list[dict[str, Any]]:
    """An id-less chat export; every tenth line an "ok" said twice at the same second."""
    rows: list[dict[str, Any]] = []
    for i in range(n):
        text = "ok" if i % 10 in (0, 1) else f"{tag}line {i}: the loader and E{i % 977}"
        rows.append({"session": f"s{i % sessions}", "role": "user" if i % 2 else "assistant",
                     "text": text, "timestamp": t0 + i // 10 * 10})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return rows


def _stored(db: Path) -> list[tuple[str, int, str, str, float | None, str]]:
    """(session, index, speaker, text, ts, message id) of every turn, read by plain SQLite."""
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return [tuple(r) for r in c.execute(  # type: ignore[misc]
                "SELECT session, turn_index, speaker, text, ts, message_id FROM turns "
                "ORDER BY session, turn_index")]
    except sqlite3.OperationalError:  # the store is still being created
        return []


def _assert_file_order(stored: Sequence[tuple[Any, ...]], rows: Sequence[dict[str, Any]],
                       whole: bool) -> None:
    """Per session: indexes 0..n-1, the file's turns in file order (a prefix unless whole)."""
    for session in {r["session"] for r in rows}:
        want = [(r["role"], r["text"], r["timestamp"]) for r in rows if r["session"] == session]
        got = [s for s in stored if s[0] == session]
        assert [s[1] for s in got] == list(range(len(got)))
        assert [(s[2], s[3], int(s[4])) for s in got] == want[:len(got)]
        if whole:
            assert len(got) == len(want)
    assert len({s[5] for s in stored}) == len(stored)  # no message id twice


def _import(file: Path, store: Path, *extra: str) -> dict[str, Any]:
    proc = subprocess.run([*CLI, "import", "jsonl", str(file), "--store", str(store),
                           "--json", *extra], env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def _kill_when_more_than(file: Path, store: Path, batch: int, seen: int) -> int:
    """Start an import, SIGKILL it once it has committed beyond ``seen`` turns."""
    db = store / "tideline.db"
    proc = subprocess.Popen([*CLI, "import", "jsonl", str(file), "--store", str(store),
                             "--batch", str(batch), "--json"], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300  # a guard against a hang, not a timing assertion
        while len(_stored(db)) <= seen:
            assert proc.poll() is None, f"the import ended before it was killed: {proc.stderr}"
            assert time.monotonic() < deadline, "the import made no progress"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return len(_stored(db))


def _kill_cycles(tmp_path: Path, kills: int) -> dict[str, Any]:
    """Import a 30,000-line export, SIGKILL it ``kills`` times mid-import, then finish it."""
    file, store, batch = tmp_path / "export.jsonl", tmp_path / "store", 250
    rows = _export(file, 30_000)
    killed_at: list[int] = []
    rng = random.Random(9)
    for _ in range(kills):
        seen = killed_at[-1] if killed_at else 0
        target = min(seen + batch * rng.randint(0, 12), len(rows) - 4 * batch)
        if target < seen:
            break  # close to the end: leave the rest to the final run
        now = _kill_when_more_than(file, store, batch, target)
        if now >= len(rows):
            break  # the kill came after the last batch
        assert seen < now and now % batch == 0  # whole batches only: each one transaction
        _assert_file_order(_stored(store / "tideline.db"), rows, whole=False)
        killed_at.append(now)
    last = killed_at[-1]
    res = _import(file, store, "--batch", str(batch))
    assert (res["inserted"], res["skipped"], res["turns"]) == (len(rows) - last, last,
                                                               len(rows))
    stored = _stored(store / "tideline.db")
    _assert_file_order(stored, rows, whole=True)
    again = _import(file, store)
    with Memory.open(store, embedder=hashing()) as mem:
        doctor = mem.doctor()
    figures = {"test": "kill9_jsonl_import", "lines": len(rows), "kills": len(killed_at),
               "killed_at": killed_at, "rows": len(stored),
               "duplicates": len(stored) - len({s[5] for s in stored}),
               "reimport_inserted": again["inserted"], "doctor_ok": doctor["ok"]}
    print(json.dumps(figures))
    return figures


def test_kill_9_mid_import_then_rerun_leaves_no_duplicate_and_no_gap(tmp_path: Path) -> None:
    """Reproducer (issue 9, item 4): a 30,000-line export (over the old 10,000-line cap),
    killed with SIGKILL twice mid-import, then run again: every turn once, in file order,
    indexes 0..n-1 per session; each batch was one transaction."""
    f = _kill_cycles(tmp_path, kills=2)
    assert f["kills"] == 2 and f["rows"] == f["lines"]
    assert f["duplicates"] == 0 and f["reimport_inserted"] == 0 and f["doctor_ok"]


@pytest.mark.stress
def test_kill_9_import_stress(tmp_path: Path) -> None:
    f = _kill_cycles(tmp_path, kills=12)
    assert f["kills"] >= 1 and f["rows"] == f["lines"]
    assert f["duplicates"] == 0 and f["reimport_inserted"] == 0 and f["doctor_ok"]


def test_parallel_importers_give_each_index_once(tmp_path: Path) -> None:
    """Reproducer (issue 9, item 3): four parallel imports into one session gave each index
    four times; each index is given once and the session is contiguous."""
    store = tmp_path / "store"
    Memory.open(store, embedder=hashing()).close()
    files = []
    for k in range(4):
        files.append(tmp_path / f"part{k}.jsonl")
        # Another time for each: the same "ok" at the same second would be the same turn.
        _export(files[-1], 150, sessions=1, tag=f"importer {k} ", t0=1_700_000_000 + k)
    procs = [subprocess.Popen([*CLI, "import", "jsonl", str(f), "--store", str(store),
                               "--batch", "7", "--json"], env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for f in files]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [o[1] for o in outs]
    stored = _stored(store / "tideline.db")
    assert [s[1] for s in stored] == list(range(600))
    assert len({s[5] for s in stored}) == 600
    for k in range(4):  # each importer's turns keep their own order
        mine = [s[4] for s in stored if s[4] % 10 == k]
        assert mine == sorted(mine) and len(mine) == 150


def test_parallel_imports_of_one_file_store_it_once(tmp_path: Path) -> None:
    """Three processes import the same id-less file at once: each turn once, in order."""
    file, store = tmp_path / "chat.jsonl", tmp_path / "store"
    rows = _export(file, 300)
    Memory.open(store, embedder=hashing()).close()
    procs = [subprocess.Popen([*CLI, "import", "jsonl", str(file), "--store", str(store),
                               "--batch", "9", "--json"], env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * 3, [o[1] for o in outs]
    assert sum(json.loads(o[0])["inserted"] for o in outs) == len(rows)
    _assert_file_order(_stored(store / "tideline.db"), rows, whole=True)


def test_turns_import_is_the_same_command(tmp_path: Path) -> None:
    """Issue 10, item 12: `tideline turns import` is an alias of `tideline import jsonl`."""
    file, store = tmp_path / "chat.jsonl", tmp_path / "store"
    _export(file, 30)
    proc = subprocess.run([*CLI, "turns", "import", str(file), "--store", str(store),
                           "--json"], env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout)
    assert (first["inserted"], first["files"], first["batches"]) == (30, 1, 1)
    assert _import(file, store)["skipped"] == 30


def test_a_line_over_its_cap_is_refused_by_line_number(tmp_path: Path) -> None:
    file = tmp_path / "chat.jsonl"
    rows = _export(file, 20)
    with file.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"session": "s0", "text": "x" * 5_000}) + "\n")
    cfg = Config.load(home=tmp_path / "store", caps=Caps(line_bytes=1_000, import_batch=8))
    with Memory.open(config=cfg, embedder=hashing()) as mem:
        with pytest.raises(InputTooLarge, match=r"chat\.jsonl:21: line longer than 1000"):
            mem.import_jsonl(file)
        assert mem.introspect()["turns"] == 16  # the two whole batches before it
        file.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{oops\n", "utf-8")
        with pytest.raises(InvalidInput, match=r"chat\.jsonl:21: not JSON"):
            mem.import_jsonl(file)
        file.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
        assert mem.import_jsonl(file)["inserted"] == 4  # fixed and re-run: it resumes
        _assert_file_order(_stored(cfg.home / "tideline.db"), rows, whole=True)


def test_a_bad_turn_names_its_line(mem: Memory, tmp_path: Path) -> None:
    file = tmp_path / "chat.jsonl"
    file.write_text('{"text": "fine"}\n\n{"text": ""}\n', "utf-8")
    with pytest.raises(InvalidInput, match=r"chat\.jsonl:3: "):
        mem.import_jsonl(file)
