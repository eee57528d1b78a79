"""Issue 33 items 5 and 8: what an export, a report or a migration leaves on disk.

- ``export`` and ``report --html`` never replace what is not a regular file (a device
  node, a FIFO, a directory); ``import`` refuses a FIFO instead of hanging on it.
- A real ``kill -9`` in the middle of an export or a migration leaves no temporary file
  (and so no copy of the store) behind: the temporary file has no name until it is
  complete; where it must have one, the next run removes it.

The kills are made deterministic with the suite's real PostgreSQL server: a lock on a
table the export reads holds the exporting process while its temporary file is open.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from tests.backend import PostgresServer
from tests.conftest import hashing

from tideline import Memory
from tideline.archive import scratch
from tideline.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, TIDELINE_EMBEDDER="hashing", **env)
    full.pop("TIDELINE_DATABASE_URL", None)
    return subprocess.run([sys.executable, "-m", "tideline", *args], capture_output=True,
                          text=True, env=full, timeout=timeout, check=False)


def _invoke(*args: str) -> tuple[int, str]:
    """The CLI in this process (exit code, stderr): a subprocess costs seconds each."""
    from typer.testing import CliRunner

    from tideline.cli import agent, app, archive, commands, sleep  # noqa: F401 - registers

    res = CliRunner().invoke(app, list(args))
    return res.exit_code, (res.stderr or "") + (res.stdout or "")


def _specials(tmp_path: Path) -> dict[str, Path]:
    out = {"fifo": tmp_path / "fifo", "directory": tmp_path / "dir"}
    os.mkfifo(out["fifo"])
    out["directory"].mkdir()
    if os.geteuid() == 0:  # a device node of our own (never the machine's /dev/full)
        out["device"] = tmp_path / "full"
        os.mknod(out["device"], stat.S_IFCHR | 0o666, os.makedev(1, 7))
    return out


def test_export_and_report_never_replace_special_files(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELINE_EMBEDDER", "hashing")
    monkeypatch.delenv("TIDELINE_DATABASE_URL", raising=False)
    store = str(tmp_path / "S")
    assert _invoke("remember", "atlas runs on PostgreSQL 16", "--store", store)[0] == 0
    for kind, path in _specials(tmp_path).items():
        mode = os.lstat(path).st_mode
        for args in (("export", str(path)), ("report", "--html", str(path))):
            code, err = _invoke(*args, "--store", store)
            assert code == 3 and "invalid_input" in err, (kind, err)
            assert "regular file" in err or "directory" in err, err
            assert os.lstat(path).st_mode == mode, (kind, args)  # still what it was
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["S", "fifo", "dir"] + (["full"] if os.geteuid() == 0 else []))


def test_import_refuses_a_fifo_instead_of_hanging(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELINE_EMBEDDER", "hashing")
    monkeypatch.delenv("TIDELINE_DATABASE_URL", raising=False)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    store = str(tmp_path / "S")
    for kind in ("tideline", "jsonl"):  # a FIFO with no writer: open() would block forever
        code, err = _invoke("import", kind, str(fifo), "--store", store)
        assert code == 3 and "regular file" in err, (kind, err)


@pytest.fixture
def pg_url(pg_server: PostgresServer, tmp_path: Path) -> Iterator[str]:
    url = pg_server.create()
    with Memory.open(tmp_path / "local", database=url, embedder=hashing()) as mem:
        for i in range(20):
            mem.remember(f"fact {i}: service-{i} listens on port {1000 + i}")
    try:
        yield url
    finally:
        pg_server.drop(url)


def _held_open(pid: int, directory: Path) -> bool:
    """Whether process ``pid`` holds a file of ``directory`` open (named or not)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        links = [os.readlink(fds / n) for n in os.listdir(fds)]
    except OSError:
        return False
    return any(link.startswith(str(directory) + "/") for link in links)


def _kill_while_locked(url: str, cmd: list[str], directory: Path, env: dict[str, str]) -> None:
    """Run ``cmd`` while a lock holds its export; kill -9 it once its file is open."""
    with psycopg.connect(url) as lock:
        lock.execute("LOCK TABLE entity_edges IN ACCESS EXCLUSIVE MODE")
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 90
            while not _held_open(proc.pid, directory):
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "the export never opened its file"
                time.sleep(0.01)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait()
            if proc.stderr:
                proc.stderr.close()
        lock.rollback()
    assert proc.returncode == -signal.SIGKILL


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing", OMP_NUM_THREADS="1", **extra)
    env.pop("TIDELINE_DATABASE_URL", None)
    return env


def test_kill_9_mid_export_leaves_no_temporary_file(pg_url: str, tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    cmd = [sys.executable, "-m", "tideline", "export", str(out_dir / "a.jsonl"),
           "--store", str(tmp_path / "local"), "--database", pg_url]
    _kill_while_locked(pg_url, cmd, out_dir, _env())
    assert os.listdir(out_dir) == []


def test_kill_9_mid_migration_leaves_no_copy_of_the_store(pg_url: str, tmp_path: Path) -> None:
    target = tmp_path / "copy"
    cmd = [sys.executable, "-m", "tideline", "migrate", "--to", str(target),
           "--store", str(tmp_path / "local"), "--database", pg_url]
    _kill_while_locked(pg_url, cmd, target, _env())
    assert os.listdir(target) == []  # no scratch archive: it had no name
    out = _cli("migrate", "--to", str(target), "--store", str(tmp_path / "local"),
               "--database", pg_url, "--json")
    assert out.returncode == 0 and '"verified": true' in out.stdout, out.stderr


def test_kill_9_with_named_temporary_files_the_next_run_sweeps(pg_url: str,
                                                              tmp_path: Path) -> None:
    """Where O_TMPFILE is missing the file has a name with its writer's pid: killed, it
    stays until the next export into that directory removes it (and only it)."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code = ("import sys; import tideline.archive.scratch as s\n"
            "s._unnamed = lambda d: None  # as on a system without O_TMPFILE\n"
            "from tideline import Memory\n"
            "from tideline.embed import HashingEmbedder\n"
            "m = Memory.open(sys.argv[1], database=sys.argv[2], embedder=HashingEmbedder())\n"
            "m.export(sys.argv[3])\n")
    cmd = [sys.executable, "-c", code, str(tmp_path / "local"), pg_url,
           str(out_dir / "a.jsonl")]
    _kill_while_locked(pg_url, cmd, out_dir, _env(PYTHONPATH=os.environ.get("PYTHONPATH", "")))
    left = os.listdir(out_dir)
    assert len(left) == 1 and left[0].startswith(".a.jsonl.") and left[0].endswith(".tmp")
    (out_dir / "mine.txt").write_text("a file of the user's", "utf-8")
    out = _cli("export", str(out_dir / "b.jsonl"), "--store", str(tmp_path / "local"),
               "--database", pg_url)
    assert out.returncode == 0, out.stderr
    assert sorted(os.listdir(out_dir)) == ["b.jsonl", "mine.txt"]


def test_sweep_spares_live_writers_and_other_files(tmp_path: Path) -> None:
    mine = scratch.named(tmp_path, "a.jsonl")
    mine.write_bytes(b"being written by this very process")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    gone = tmp_path / f".a.jsonl.{int(dead.stdout)}-0123456789ab.tmp"
    gone.write_bytes(b"left by a killed export")
    other = tmp_path / ".a.jsonl.notours.tmp"
    other.write_bytes(b"")
    assert scratch.sweep(tmp_path) == 1
    assert mine.exists() and other.exists() and not gone.exists()
    with pytest.raises(InvalidInput, match="FIFO"):
        from tideline.archive.paths import open_regular

        os.mkfifo(tmp_path / "f")
        open_regular(tmp_path / "f")
