"""Tests of the derived vector index against a real SQLite-backed change log.

SQLite only (tests/backend.py): the local ANN file; PostgreSQL searches pgvector HNSW.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tideline import Memory
from tideline.errors import InvalidInput
from tideline.store.sqlite.vector_index import SyncReport, VectorIndex, VectorSource

DIM = 32
SRC = Path(__file__).resolve().parents[2] / "src"


class SqliteSource:
    """A VectorSource over ``vec(key, v)`` + append-only ``vec_log(seq, key, present)``."""

    def __init__(self, path: Path, dim: int = DIM) -> None:
        self.path = path
        self.dim = dim
        self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS vec(key INTEGER PRIMARY KEY, v BLOB)")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS vec_log("
            "seq INTEGER PRIMARY KEY AUTOINCREMENT, key INTEGER, present INTEGER)"
        )
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    # writes (what the store does) ------------------------------------------------
    def put(self, keys: Sequence[int], vectors: np.ndarray) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        for key, vec in zip(keys, vectors, strict=True):
            blob = np.asarray(vec, dtype=np.float32).tobytes()
            self.conn.execute("INSERT OR REPLACE INTO vec(key, v) VALUES (?, ?)", (int(key), blob))
            self.conn.execute("INSERT INTO vec_log(key, present) VALUES (?, 1)", (int(key),))
        self.conn.execute("COMMIT")

    def delete(self, keys: Sequence[int]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        for key in keys:
            self.conn.execute("DELETE FROM vec WHERE key = ?", (int(key),))
            self.conn.execute("INSERT INTO vec_log(key, present) VALUES (?, 0)", (int(key),))
        self.conn.execute("COMMIT")

    def snapshot(self) -> dict[int, np.ndarray]:
        rows = self.conn.execute("SELECT key, v FROM vec").fetchall()
        return {int(k): np.frombuffer(v, dtype=np.float32) for k, v in rows}

    # VectorSource ---------------------------------------------------------------
    def vector_seq(self) -> int:
        self._count("vector_seq")
        row = self.conn.execute("SELECT max(seq) FROM vec_log").fetchone()
        return int(row[0] or 0)

    def vector_changes(self, since: int) -> list[tuple[int, int, bool]]:
        self._count("vector_changes")
        rows = self.conn.execute(
            "SELECT seq, key, present FROM vec_log WHERE seq > ? ORDER BY seq", (since,)
        ).fetchall()
        return [(int(s), int(k), bool(p)) for s, k, p in rows]

    def vectors_for(self, keys: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        self._count("vectors_for")
        found: list[int] = []
        blobs: list[bytes] = []
        for start in range(0, len(keys), 500):
            chunk = [int(k) for k in keys[start : start + 500]]
            marks = ",".join("?" * len(chunk))
            for k, v in self.conn.execute(f"SELECT key, v FROM vec WHERE key IN ({marks})", chunk):
                found.append(int(k))
                blobs.append(v)
        return self._pack(found, blobs)

    def iter_all_vectors(self, batch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        self._count("iter_all_vectors")
        last = -(2**63)
        while True:
            rows = self.conn.execute(
                "SELECT key, v FROM vec WHERE key > ? ORDER BY key LIMIT ?", (last, batch)
            ).fetchall()
            if not rows:
                return
            last = int(rows[-1][0])
            yield self._pack([int(r[0]) for r in rows], [r[1] for r in rows])

    def vector_count(self) -> int:
        self._count("vector_count")
        return int(self.conn.execute("SELECT count(*) FROM vec").fetchone()[0])

    def _pack(self, keys: list[int], blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        if not keys:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim), dtype=np.float32)
        mat = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(keys), self.dim)
        return np.asarray(keys, dtype=np.int64), mat


def unit(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    out: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def exact_top(source: SqliteSource, query: np.ndarray, k: int) -> list[int]:
    snap = source.snapshot()
    keys = np.array(list(snap), dtype=np.int64)
    mat = np.stack([snap[int(key)] for key in keys])
    mat = mat / np.linalg.norm(mat, axis=1, keepdims=True)
    sims = mat @ (query / np.linalg.norm(query))
    return [int(keys[i]) for i in np.argsort(-sims, kind="stable")[:k]]


def index_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix == ".vix")


@pytest.fixture
def source(tmp_path: Path) -> SqliteSource:
    return SqliteSource(tmp_path / "store.db")


@pytest.fixture
def idx_dir(tmp_path: Path) -> Path:
    return tmp_path / "index"


def make(idx_dir: Path, **kw: object) -> VectorIndex:
    return VectorIndex(idx_dir, "m-global", DIM, "hash-v1", **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- basics


def test_source_satisfies_protocol(source: SqliteSource) -> None:
    assert isinstance(source, VectorSource)


@pytest.mark.parametrize("exact_below", [20_000, 0])
def test_rebuild_from_scratch(source: SqliteSource, idx_dir: Path, exact_below: int) -> None:
    vecs = unit(300)
    source.put(range(1, 301), vecs)
    idx = make(idx_dir, exact_below=exact_below)
    seen: list[tuple[int, int]] = []
    report = idx.sync(source, progress=lambda done, total: seen.append((done, total)))
    assert report.rebuilt and report.reason == "no saved index"
    assert report.seq == source.vector_seq() == idx.seq
    assert len(idx) == 300
    assert idx.mode == ("exact" if exact_below else "hnsw")
    assert seen and seen[-1] == (300, 300)
    (key, sim), *_ = idx.search(vecs[41], 5)
    assert key == 42 and sim == pytest.approx(1.0, abs=1e-2)
    assert index_files(idx_dir), "a rebuild is persisted"


def test_explicit_rebuild_and_empty_source(source: SqliteSource, idx_dir: Path) -> None:
    idx = make(idx_dir)
    assert idx.search(unit(1)[0], 3) == []  # nothing loaded yet
    report = idx.sync(source)
    assert report.rebuilt and len(idx) == 0 and idx.search(unit(1)[0], 3) == []
    source.put([7, 8], unit(2))
    idx.rebuild(source)
    assert len(idx) == 2 and idx.seq == source.vector_seq()


def test_sync_is_cheap_when_nothing_changed(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(50), unit(50))
    idx = make(idx_dir)
    idx.sync(source)
    seq = source.vector_seq()
    source.calls.clear()
    report = idx.sync(source)
    assert source.calls == {"vector_seq": 1}
    assert report == SyncReport(0, False, "up to date", seq)


@pytest.mark.parametrize("exact_below", [20_000, 0])
def test_search_exact_mode_matches_brute_force(
    source: SqliteSource, idx_dir: Path, exact_below: int
) -> None:
    source.put(range(1000), unit(1000, seed=1))
    idx = make(idx_dir, exact_below=exact_below)
    idx.sync(source)
    queries = unit(20, seed=2)
    for q in queries:
        got = idx.search(q * 3.0, 10)  # queries need not be normalised
        if exact_below:
            assert [k for k, _ in got] == exact_top(source, q, 10)
            snap = source.snapshot()
            for key, sim in got:
                assert sim == pytest.approx(float(snap[key] @ q), abs=1e-5)
        sims = [s for _, s in got]
        assert sims == sorted(sims, reverse=True)


def test_query_validation(source: SqliteSource, idx_dir: Path) -> None:
    source.put([1], unit(1))
    idx = make(idx_dir)
    idx.sync(source)
    with pytest.raises(InvalidInput):
        idx.search(np.zeros(DIM + 1, dtype=np.float32), 3)
    with pytest.raises(InvalidInput):
        idx.search(np.zeros(DIM, dtype=np.float32), 3)
    with pytest.raises(InvalidInput):
        idx.search(np.full(DIM, np.nan, dtype=np.float32), 3)
    assert idx.search(unit(1)[0], 0) == []
    with pytest.raises(InvalidInput):
        VectorIndex(idx_dir, "../escape", DIM, "m")


# ------------------------------------------------------------------ catching up


@pytest.mark.parametrize("exact_below", [20_000, 0])
def test_incremental_catch_up_after_other_instance_writes(
    source: SqliteSource, idx_dir: Path, exact_below: int
) -> None:
    source.put(range(200), unit(200))
    a = make(idx_dir, exact_below=exact_below)
    a.sync(source)
    b = make(idx_dir, exact_below=exact_below)
    assert b.sync(source).reason.startswith("loaded")

    # "Process" B's writer: add, delete, and replace a vector (re-add an existing key).
    new = unit(30, seed=5)
    source.put(range(200, 230), new)
    source.delete([0, 1, 2, 201])
    moved = unit(1, seed=6)
    source.put([5], moved)
    b_report = b.sync(source)
    a_report = a.sync(source)
    for report in (a_report, b_report):
        assert not report.rebuilt and report.applied == 30 + 4 + 1
        assert report.seq == source.vector_seq()
    for idx in (a, b):
        assert len(idx) == source.vector_count() == 226
        keys = {k for k, _ in idx.search(new[0], 226)}
        assert {0, 1, 2, 201}.isdisjoint(keys)
        assert idx.search(moved[0], 1)[0][0] == 5
        assert idx.search(new[10], 1)[0][0] == 210


def test_catch_up_from_real_subprocess(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(100), unit(100))
    idx = make(idx_dir)
    idx.sync(source)
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(SRC)!r}, {str(Path(__file__).parent)!r}]
        from pathlib import Path
        from test_vector_index import SqliteSource, make, unit
        src = SqliteSource(Path({str(source.path)!r}))
        src.put(range(100, 160), unit(60, seed=9))
        src.delete(range(0, 10))
        other = make(Path({str(idx_dir)!r}))
        report = other.sync(src)
        assert not report.rebuilt, report
        other.save()
        print(report.applied)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "70"
    report = idx.sync(source)
    assert (report.applied, report.rebuilt) == (70, False)
    assert len(idx) == 150
    fresh = make(idx_dir)
    source.calls.clear()
    report = fresh.sync(source)
    assert report.reason.startswith("loaded") and report.applied == 0
    assert "iter_all_vectors" not in source.calls
    assert fresh.search(unit(60, seed=9)[3], 1)[0][0] == 103


def test_saved_file_reload_skips_rebuild(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(500), unit(500))
    first = make(idx_dir)
    first.sync(source)
    first.save()
    source.put([900, 901], unit(2, seed=3))
    source.calls.clear()
    second = make(idx_dir)
    report = second.sync(source)
    assert not report.rebuilt and report.reason.startswith("loaded") and report.applied == 2
    assert "iter_all_vectors" not in source.calls
    assert len(second) == 502


def test_close_and_autosave_persist(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(10), unit(10))
    idx = make(idx_dir, autosave_after=50)
    idx.sync(source)
    saved = index_files(idx_dir)
    source.put(range(10, 40), unit(30, seed=1))
    idx.sync(source)  # 30 < 50 changes: no new file
    assert index_files(idx_dir) == saved
    source.put(range(40, 70), unit(30, seed=2))
    idx.sync(source)  # 60 >= 50: autosaved
    assert index_files(idx_dir) != saved
    source.put(range(70, 300), unit(230, seed=3))
    idx2 = make(idx_dir, autosave_after=10_000)
    idx2.sync(source)
    idx2.close()  # 230 unsaved changes >= close threshold
    assert len(idx2) == 0
    reopened = make(idx_dir)
    report = reopened.sync(source)
    assert report.reason.startswith("loaded") and report.applied == 0 and len(reopened) == 300
    assert len(index_files(idx_dir)) <= 2


# ------------------------------------------------------------- invalid saved files


def _corrupt_truncate(p: Path) -> None:
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _corrupt_flip(p: Path) -> None:
    data = bytearray(p.read_bytes())
    data[len(data) // 3] ^= 0xFF
    p.write_bytes(bytes(data))


def _corrupt_empty(p: Path) -> None:
    p.write_bytes(b"")


def _corrupt_garbage(p: Path) -> None:
    p.write_bytes(os.urandom(4096))


def _corrupt_symlink(p: Path) -> None:
    target = p.with_name("elsewhere.bin")
    p.rename(target)
    p.symlink_to(target)


@pytest.mark.parametrize("exact_below", [20_000, 0])
@pytest.mark.parametrize(
    "corrupt",
    [_corrupt_truncate, _corrupt_flip, _corrupt_empty, _corrupt_garbage, _corrupt_symlink],
)
def test_corrupt_file_rebuilds(
    source: SqliteSource, idx_dir: Path, corrupt: object, exact_below: int
) -> None:
    source.put(range(400), unit(400))
    writer = make(idx_dir, exact_below=exact_below)
    writer.sync(source)
    writer.save()
    (path,) = index_files(idx_dir)
    corrupt(path)  # type: ignore[operator]
    reader = make(idx_dir, exact_below=exact_below)
    report = reader.sync(source)
    assert report.rebuilt and "invalid" in report.reason
    assert len(reader) == 400
    assert reader.search(unit(400)[17], 1)[0][0] == 17
    # the bad file is gone and a good one replaces it
    again = make(idx_dir, exact_below=exact_below)
    assert again.sync(source).reason.startswith("loaded")


def test_marker_change_rebuilds(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(100), unit(100))
    VectorIndex(idx_dir, "m-global", DIM, "embedder-a").sync(source)
    other = VectorIndex(idx_dir, "m-global", DIM, "embedder-b")
    report = other.sync(source)
    assert report.rebuilt and "marker" in report.reason
    assert len(other) == 100


def test_a_save_keeps_the_newer_index_of_another_marker(
    source: SqliteSource, idx_dir: Path,
) -> None:
    """Two embedders' indexes share a directory while a re-embed runs: the pruning after
    a save drops only older files of another marker, never the newer index of the other
    one (a shadowed loop variable in the split-out file module deleted it)."""
    source.put(range(50), unit(50))
    old = VectorIndex(idx_dir, "m-global", DIM, "embedder-a")
    old.sync(source)  # a rebuild saves at once
    source.put(range(50, 60), unit(10, seed=1))
    before = set(index_files(idx_dir))
    new = VectorIndex(idx_dir, "m-global", DIM, "embedder-b")
    new.sync(source)
    (newer,) = set(index_files(idx_dir)) - before
    old.save()
    assert newer in index_files(idx_dir)
    report = VectorIndex(idx_dir, "m-global", DIM, "embedder-b").sync(source)
    assert report.reason == f"loaded {newer.name}" and not report.rebuilt


def test_dim_change_rebuilds(tmp_path: Path, idx_dir: Path) -> None:
    small = SqliteSource(tmp_path / "a.db", dim=8)
    small.put(range(20), unit(20, dim=8))
    VectorIndex(idx_dir, "m-global", 8, "same").sync(small)
    big = SqliteSource(tmp_path / "b.db", dim=16)
    big.put(range(30), unit(30, dim=16))
    idx = VectorIndex(idx_dir, "m-global", 16, "same")
    report = idx.sync(big)
    assert report.rebuilt and len(idx) == 30


def test_header_marker_mismatch_with_matching_name_rebuilds(
    source: SqliteSource, idx_dir: Path
) -> None:
    source.put(range(50), unit(50))
    a = VectorIndex(idx_dir, "m-global", DIM, "embedder-a")
    a.sync(source)
    (path,) = index_files(idx_dir)
    b = VectorIndex(idx_dir, "m-global", DIM, "embedder-b")
    forged = path.name.split(".")
    forged[1] = b._tag  # same file content, but named as if written for marker b
    path.rename(idx_dir / ".".join(forged))
    report = b.sync(source)
    assert report.rebuilt and "another marker" in report.reason


def test_database_replaced_behind_index(tmp_path: Path, idx_dir: Path) -> None:
    old = SqliteSource(tmp_path / "old.db")
    old.put(range(100), unit(100))
    old.delete(range(50))
    make(idx_dir).sync(old)
    new = SqliteSource(tmp_path / "new.db")
    new.put(range(5), unit(5, seed=4))
    idx = make(idx_dir)
    report = idx.sync(new)
    assert report.rebuilt and len(idx) == 5
    # an in-memory index whose seq is ahead of the source is rebuilt too
    newer = SqliteSource(tmp_path / "newer.db")
    newer.put([1], unit(1))
    report = idx.sync(newer)
    assert report.rebuilt and report.reason == "source log is behind the index" and len(idx) == 1


def test_count_mismatch_rebuilds(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(100), unit(100))
    idx = make(idx_dir)
    idx.sync(source)
    source.conn.execute("DELETE FROM vec WHERE key < 10")  # bypasses the log
    source.put([500], unit(1, seed=8))
    report = idx.sync(source)
    assert report.rebuilt and report.reason == "count mismatch"
    assert len(idx) == 91 == source.vector_count()


def test_mode_switches_with_size(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(40), unit(40))
    idx = make(idx_dir, exact_below=60)
    idx.sync(source)
    assert idx.mode == "exact"
    source.put(range(40, 80), unit(40, seed=1))
    idx.sync(source)
    assert idx.mode == "hnsw" and len(idx) == 80
    assert idx.search(unit(40, seed=1)[5], 1)[0][0] == 45
    source.delete(range(60))
    report = idx.sync(source)
    assert idx.mode == "exact" and len(idx) == 20 and report.rebuilt
    assert [k for k, _ in idx.search(unit(40, seed=1)[30], 20)] == exact_top(
        source, unit(40, seed=1)[30], 20
    )


# --------------------------------------------------------------------- HNSW quality


def test_hnsw_recall_at_10(source: SqliteSource, idx_dir: Path) -> None:
    n = 5000
    vecs = unit(n, seed=11)
    source.put(range(n), vecs)
    idx = make(idx_dir, exact_below=0)
    idx.sync(source)
    assert idx.mode == "hnsw"
    queries = unit(100, seed=12)
    sims = queries @ vecs.T
    truth = np.argsort(-sims, axis=1)[:, :10]
    hits = 0
    for q, expected in zip(queries, truth, strict=True):
        got = {k for k, _ in idx.search(q, 10)}
        hits += len(got & set(expected.tolist()))
    assert hits / (10 * len(queries)) >= 0.9


# ------------------------------------------------------------------- the filter


@pytest.mark.parametrize("exact_below", [20_000, 0])
def test_allowed_filter_never_leaks(
    tmp_path_factory: pytest.TempPathFactory, exact_below: int
) -> None:
    base = tmp_path_factory.mktemp("filter")
    src = SqliteSource(base / "db.sqlite")
    n = 600
    vecs = unit(n, seed=21)
    src.put(range(n), vecs)
    idx = VectorIndex(base / "idx", "f", DIM, "m", exact_below=exact_below)
    idx.sync(src)

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @example(modulus=125, residue=225, k=4, qi=0)  # once seen: the graph alone found 3 of 4
    @given(
        modulus=st.integers(1, 700),
        residue=st.integers(0, 699),
        k=st.integers(1, 50),
        qi=st.integers(0, n - 1),
    )
    def check(modulus: int, residue: int, k: int, qi: int) -> None:
        def allowed(key: int) -> bool:
            return key % modulus == residue % modulus

        got = idx.search(vecs[qi] + 0.01, k, allowed=allowed)
        assert all(allowed(key) for key, _ in got)
        assert len({key for key, _ in got}) == len(got) <= k
        n_allowed = sum(1 for key in range(n) if allowed(key))
        # The graph falls back to an exact scan of the allowed keys when its own search
        # runs dry, so both modes always fill k from what is allowed.
        assert len(got) == min(k, n_allowed)
        if exact_below:
            snap_sims = vecs @ ((vecs[qi] + 0.01) / np.linalg.norm(vecs[qi] + 0.01))
            want = sorted(
                (key for key in range(n) if allowed(key)), key=lambda key: -snap_sims[key]
            )[:k]
            assert [key for key, _ in got] == want

    check()


# ------------------------------------------------------------------- concurrency


@pytest.mark.parametrize("exact_below", [20_000, 0])
def test_concurrent_saves_leave_a_consistent_file(
    source: SqliteSource, idx_dir: Path, exact_below: int
) -> None:
    source.put(range(1500), unit(1500))
    a = make(idx_dir, exact_below=exact_below)
    b = make(idx_dir, exact_below=exact_below)
    a.sync(source)
    b.sync(source)
    errors: list[BaseException] = []

    def hammer(idx: VectorIndex, seed: int) -> None:
        try:
            for i in range(6):
                src = SqliteSource(source.path)
                src.put([10_000 + seed * 100 + i], unit(1, seed=seed * 100 + i))
                idx.sync(src)
                idx.save()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(x, s)) for s, x in ((1, a), (2, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    a.save()
    b.save()
    files = index_files(idx_dir)
    assert 1 <= len(files) <= 2
    assert not [p for p in idx_dir.iterdir() if p.name.endswith(".tmp")]
    fresh = make(idx_dir, exact_below=exact_below)
    source.calls.clear()
    report = fresh.sync(source)
    assert report.reason.startswith("loaded") and not report.rebuilt
    assert "iter_all_vectors" not in source.calls
    assert len(fresh) == source.vector_count() == 1512


def test_concurrent_saves_from_two_processes(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(3000), unit(3000))
    script = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = [{str(SRC)!r}, {str(Path(__file__).parent)!r}]
        from pathlib import Path
        from test_vector_index import SqliteSource, make
        src = SqliteSource(Path({str(source.path)!r}))
        idx = make(Path({str(idx_dir)!r}), exact_below=0)
        idx.sync(src)
        for _ in range(5):
            idx.save()
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(SRC)},
        )
        for _ in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    fresh = make(idx_dir, exact_below=0)
    report = fresh.sync(source)
    assert report.reason.startswith("loaded") and not report.rebuilt
    assert len(fresh) == 3000 and fresh.mode == "hnsw"
    assert fresh.search(unit(3000)[1234], 1)[0][0] == 1234
    assert len(index_files(idx_dir)) <= 2


def test_threads_search_while_syncing(source: SqliteSource, idx_dir: Path) -> None:
    source.put(range(300), unit(300))
    idx = make(idx_dir, exact_below=200)
    idx.sync(source)
    stop = threading.Event()
    errors: list[BaseException] = []

    def searcher() -> None:
        q = unit(1, seed=99)[0]
        try:
            while not stop.is_set():
                got = idx.search(q, 5, allowed=lambda key: key % 2 == 0)
                assert all(key % 2 == 0 for key, _ in got)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=searcher)
    worker.start()
    try:
        for i in range(10):
            source.put(range(1000 + i * 10, 1010 + i * 10), unit(10, seed=i))
            source.delete(range(i * 20, i * 20 + 20))
            idx.sync(source)
    finally:
        stop.set()
        worker.join()
    assert not errors
    assert len(idx) == source.vector_count()


def test_doctor_repair_saves_an_empty_space(mem: Memory) -> None:
    """Found by the hostile-argument stress run: `doctor --repair` on a store with memories
    but no raw turns failed with TypeError (memoryview cannot cast an empty matrix)."""
    mem.remember("a memory without any raw turn", scope="atlas")
    assert mem.doctor(repair=True)["ok"]
