"""Sleep at scale: ``python -m tideline.bench.sleep --n 100000``.

Builds a store of N synthetic memories (hashing embedder, 384 dimensions; four
scopes; 8 % Chinese, 5 % German, 5 % Russian, the rest English; tags, roles,
source_links on 70 %), a few thousand raw turns, and real recall traffic
(journal, attention, eligibility) — then measures:

* ``full``: a forced full sleep — backup, every step, clusters and topics
  rebuilt from scratch (the target: ≤ 60 s at 100k on 2 cores);
* ``incremental``: a gated sleep after a few hundred new memories and recalls
  (clusters extended, not rebuilt);
* ``gated_in_process``: the no-op when nothing changed, inside an open process;
* ``gated_process``: ``python -m tideline sleep --json`` as a whole process,
  median of repeated runs (the target: ≤ 150 ms).

Prints one JSON line (per-step milliseconds, peak RSS). ``--backend sqlite,postgres``
runs it on each backend in turn (SQLite first, the baseline; PostgreSQL on an embedded
server or ``--database URL``, see :mod:`tideline.bench.backends`) and prints one more
line side by side.

``--keep DIR`` keeps the loaded store (before any sleep; PostgreSQL: the embedded server's
data included) in ``DIR/sleep-<backend>-<n>-…`` and measures every later run on a fresh
copy of it, so a run after a change to sleep measures the same store without loading
it again (loading 100k memories on PostgreSQL takes most of half an hour on two cores).
``--kept DIR`` measures a copy of a store that ``bench recall --keep DIR`` kept instead
(``DIR/hashing-<n>``, ``DIR/postgres-hashing-<n>``: N one-scope facts with recall
traffic, no tags and no raw turns), so both backends sleep over the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tideline.bench.backends import Place, machine, parse_backends, place
from tideline.config import Config
from tideline.embed import HashingEmbedder
from tideline.errors import InvalidInput
from tideline.memory import Memory
from tideline.models import MemoryRecord, compute_weight

__all__ = ["build_store", "main", "run"]

_EN = ("database replica vacuum index query planner checkpoint deploy rollback release "
       "pipeline staging canary latency cache eviction queue consumer broker retention "
       "schema migration backup restore snapshot alert pager incident postmortem review "
       "design proposal budget roadmap customer invoice billing refund contract audit "
       "garden tomato compost violin rehearsal concert train ticket airport hotel luggage "
       "kitchen recipe oven bread flour marathon training knee physio sleep dream tide "
       "river harbour boat sail anchor storm lighthouse map compass north winter").split()
_ZH = ("边界 审查 设计 数据库 部署 回滚 会议 需求 测试 性能 缓存 日志 架构 "
       "判断 执行 拒绝 逃避 失控 记忆 梦境 潮汐 河流 港口 灯塔 地图 冬天 "
       "预算 合同 客户 发票 迁移 备份 告警 事故 复盘").split()
_DE = ("Datenbank Sicherung Bereitstellung Pipeline Abend Besprechung Entwurf Rechnung "
       "Kunde Vertrag Garten Konzert Zug Flughafen Gepäck Küche Rezept Brot Winter").split()
_RU = ("база данных резервная копия развертывание встреча проект счет клиент договор сад "
       "концерт поезд аэропорт багаж кухня рецепт хлеб зима").split()
_NAMES = "Mira Bo Aiko Priya Omar Sofia Lars Noor 照照 甜心 Ines Pavel".split()
_ROLES = "判断 执行 审查 设计 review deploy plan ops".split()
_SCOPES = (("global", 0.4), ("proj-a", 0.3), ("proj-b", 0.2), ("proj-c", 0.1))
_DAY = 86_400.0


def _text(rng: random.Random, topic: int) -> str:
    roll = rng.random()
    if roll < 0.08:
        words = _ZH
        base = [words[(topic * 3 + i) % len(words)] for i in range(3)]
        return "".join(base + rng.sample(words, 4)) + "。"
    if roll < 0.13:
        return " ".join([_DE[topic % len(_DE)], *rng.sample(_DE, 5)]) + "."
    if roll < 0.18:
        return " ".join([_RU[topic % len(_RU)], *rng.sample(_RU, 5)]) + "."
    core = [_EN[(topic * 5 + i) % len(_EN)] for i in range(3)]
    return " ".join(core + rng.sample(_EN, 5)) + f" (item {rng.randrange(10**6)})."


def build_store(home: Path, n: int, turns: int, recalls: int, seed: int = 7,
                progress: bool = True, where: Place | None = None) -> dict[str, Any]:
    """Create the synthetic store (in ``where``, default the SQLite store ``home``);
    returns load timings."""
    rng = random.Random(seed)
    emb = HashingEmbedder()
    cfg = Config.load(home=home, embedder="hashing")
    now = time.time()
    t0 = time.perf_counter()
    extra = where.open_args() if where is not None else {}
    with Memory.open(config=cfg, embedder=emb, project="global", **extra) as mem:
        sessions = max(1, turns // 40)
        rows = []
        for i in range(turns):
            ts = now - rng.uniform(0, 120) * _DAY
            rows.append({"session": f"s{i % sessions}", "role": "user" if i % 2 else
                         "assistant", "text": _text(rng, rng.randrange(60)), "timestamp": ts,
                         "id": f"t{i}"})
        turn_ids: list[int] = []
        for lo in range(0, len(rows), 5_000):
            res = mem.add_turns(rows[lo:lo + 5_000], scope="global", source="bench")
            turn_ids.extend(res.turn_ids)
        t_turns = time.perf_counter() - t0
        scopes = [s for s, _ in _SCOPES]
        weights = [w for _, w in _SCOPES]
        for lo in range(0, n, 5_000):
            batch = []
            for _ in range(min(5_000, n - lo)):
                topic = rng.randrange(60)
                recorded = now - rng.uniform(0, 120) * _DAY
                imp, emo, unres = rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 5)
                roles = ""
                if rng.random() < 0.2:
                    a, b = rng.sample(_NAMES, 2)
                    roles = f"{a}={'+'.join(rng.sample(_ROLES, 2))}; {b}={rng.choice(_ROLES)}"
                links = (rng.choice(turn_ids),) if turn_ids and rng.random() < 0.7 else ()
                batch.append(MemoryRecord(
                    id=0, scope=rng.choices(scopes, weights)[0], kind=rng.choice(
                        ("fact", "episode", "narrative", "decision", "preference")),
                    gesture=_text(rng, topic), tags=(f"topic{topic}", f"area{topic % 7}"),
                    entities_role=roles, source_links=links, importance=imp, emotional=emo,
                    unresolved=unres, weight=compute_weight(imp, emo, 1, unres),
                    stability=rng.choice((7.0, 7.0, 12.6, 22.7, 90.0)),
                    reinforcements=rng.randint(0, 4), last_access=recorded +
                    rng.uniform(0, now - recorded), recorded_at=recorded, updated_at=recorded))
            vectors = emb.embed_passages([r.gesture for r in batch])
            with mem.store.transaction() as c:
                for rec, vec in zip(batch, vectors, strict=True):
                    mem.store.insert_memory(c, rec, vec)
            if progress and (lo // 5_000) % 4 == 0:
                print(f"  loaded {lo + len(batch)}/{n} ({time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
        t_mem = time.perf_counter() - t0 - t_turns
        t1 = time.perf_counter()
        for i in range(recalls):
            mem.recall(" ".join(rng.sample(_EN, 3)), scope=rng.choice(scopes),
                       tier="bench", include_turns=False)
            if i % 10 == 0:
                mem.reflect([rng.randrange(1, n + 1)], rng.choice((0.5, 1.0, -0.5)))
        t_recall = time.perf_counter() - t1
    return {"load_turns_s": round(t_turns, 1), "load_memories_s": round(t_mem, 1),
            "recalls_s": round(t_recall, 1)}


def _gated_process(home: Path, runs: int, where: Place | None = None) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure what an installed package sees
    if where is not None and where.database is not None:
        env["TIDELINE_DATABASE_URL"] = where.database
        if where.namespace is not None:
            env["TIDELINE_NAMESPACE"] = where.namespace
    cmd = [sys.executable, "-m", "tideline", "sleep", "--json", "--store", str(home)]
    warm = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)  # noqa: S603 - warm the cache
    if warm.returncode != 0:
        raise RuntimeError(f"`tideline sleep` exited {warm.returncode}: "
                           f"{warm.stdout[-2000:]} {warm.stderr[-2000:]}")
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)  # noqa: S603
        times.append((time.perf_counter() - t) * 1000)
        if not json.loads(out.stdout)["skipped"]:
            raise RuntimeError("the gated sleep did not skip")
    return {"median_ms": round(statistics.median(times), 1), "min_ms": round(min(times), 1),
            "max_ms": round(max(times), 1), "runs": runs}


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy a kept store, ownership included (the embedded server's data directory
    belongs to its own system user when the bench runs as root)."""
    shutil.copytree(src, dst, symlinks=True)
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    for folder, dirs, files in os.walk(src):
        rel = Path(folder).relative_to(src)
        for name in [".", *dirs, *files]:
            st = os.lstat(Path(folder) / name)
            os.lchown(dst / rel / name, st.st_uid, st.st_gid)


def _kept(keep: Path, backend: str, n: int, turns: int, recalls: int,
          seed: int) -> tuple[Path, dict[str, Any]]:
    """The kept loaded store (built on first use) and its load figures."""
    kept = keep / f"sleep-{backend}-{n}-{turns}-{recalls}-{seed}"
    manifest = kept / "loaded.json"
    reused = manifest.exists()
    if not reused:
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        with place(backend, kept, f"sleep-{n}", keep=True) as where:
            load = build_store(where.home, n, turns, recalls, seed, where=where)
        manifest.write_text(json.dumps(load))
    return kept, json.loads(manifest.read_text()) | {"reused": reused}


def _recall_store(kept: Path, backend: str, n: int) -> tuple[Path, dict[str, Any]]:
    """A store kept by the recall bench, and its load figures."""
    base = kept / (f"hashing-{n}" if backend == "sqlite" else f"{backend}-hashing-{n}")
    manifest = base / "loaded.json"
    if not manifest.exists():
        raise InvalidInput(f"--kept: no store kept by `bench recall --keep` in {base}")
    loaded = json.loads(manifest.read_text())
    return base, {"load_memories_s": loaded.get("bulk_load_s"), "recall_bench_store": True,
                  "reused": True}


def run(n: int, turns: int, recalls: int, seed: int = 7, home: Path | None = None,
        process_runs: int = 15, backend: str = "sqlite",
        database: str | None = None, keep: Path | None = None,
        kept: Path | None = None) -> dict[str, Any]:
    """Build (or copy the store kept in ``keep``), then measure full, incremental and
    gated sleeps (on ``backend``).

    Raises:
        InvalidInput: ``keep`` with a given ``database`` (only an embedded server's
            data can be kept).
    """
    if (keep is not None or kept is not None) and database is not None:
        raise InvalidInput("--keep keeps an embedded server's data; not with --database")
    with tempfile.TemporaryDirectory(prefix="tideline-bench-sleep-") as tmp:
        base = Path(tmp) / "run"
        load: dict[str, Any] | None = None
        if kept is not None:
            source, load = _recall_store(kept, backend, n)
            _copy_tree(source, base)
        elif keep is not None:
            source, load = _kept(keep, backend, n, turns, recalls, seed)
            _copy_tree(source, base)
        with place(backend, base, f"sleep-{n}-{time.time_ns()}",
                   database=database) as where:
            return _measure(where, home or where.home, n, turns, recalls, seed,
                            process_runs, backend, load)


def _server_cpu(where: Place) -> float:
    """CPU seconds the embedded server's processes used so far (0 without one): on a
    loaded machine wall time says more about the other jobs than about the sleep."""
    pid_file = where.home.parent / "pg" / "postmaster.pid"
    if where.backend != "postgres" or not pid_file.exists():
        return 0.0
    postmaster = pid_file.read_text().split()[0]
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[1] == postmaster or entry == postmaster:
            ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


class _StepClock:
    """Client and server CPU seconds per sleep step (the progress callback)."""

    def __init__(self, where: Place) -> None:
        self.where = where
        self.cpu: dict[str, dict[str, float]] = {}
        self._step: str | None = None
        self._at = (time.process_time(), _server_cpu(where))

    def __call__(self, step: str | None) -> None:
        now = (time.process_time(), _server_cpu(self.where))
        if self._step is not None:
            self.cpu[self._step] = {"client": round(now[0] - self._at[0], 2),
                                    "server": round(now[1] - self._at[1], 2)}
        self._step, self._at = step, now


def _measure(where: Place, root: Path, n: int, turns: int, recalls: int, seed: int,
             process_runs: int, backend: str, load: dict[str, Any] | None) -> dict[str, Any]:
    if load is None:
        load = build_store(root, n, turns, recalls, seed, where=where)
    rng = random.Random(seed + 1)
    with Memory.open(root, embedder=HashingEmbedder(), project="global",
                     **where.open_args()) as mem:
        clock = _StepClock(where)
        t = time.perf_counter()
        full = mem.sleep(force=True, progress=clock)
        full_s = time.perf_counter() - t
        clock(None)
        for _ in range(300):
            mem.remember(_text(rng, rng.randrange(60)), scope="proj-a")
        for _ in range(100):
            mem.recall(" ".join(rng.sample(_EN, 3)), scope="proj-a", include_turns=False)
        t = time.perf_counter()
        inc = mem.sleep()
        inc_s = time.perf_counter() - t
        t = time.perf_counter()
        gated = mem.sleep()
        gated_ms = (time.perf_counter() - t) * 1000
        size = int(mem.store.describe()["bytes"])
    proc = _gated_process(root, process_runs, where)
    return {
        "bench": "sleep", "backend": backend, "n": n, "turns": turns, "recalls": recalls,
        "machine": machine() | {"python": platform.python_version()},
        "load": load, "db_mb": round(size / 1e6, 1) if size is not None else None,
        "full": {"s": round(full_s, 2), "errors": full["errors"],
                 "backup_ms": full["backup_ms"],
                 "steps_ms": {k: v["ms"] for k, v in full["steps"].items()},
                 "steps_cpu_s": clock.cpu,
                 "cpu_s": {side: round(sum(v[side] for v in clock.cpu.values()), 2)
                           for side in ("client", "server")},
                 "clusters": full["steps"]["clusters"]["clusters"],
                 "topics": full["steps"]["topics"]["clusters"],
                 "co_recall": full["steps"]["plasticity"]["written"]},
        "incremental": {"s": round(inc_s, 2), "skipped": inc["skipped"],
                        "steps_ms": {k: v["ms"] for k, v in inc.get("steps", {}).items()}},
        "gated_in_process_ms": round(gated_ms, 2), "gated_skipped": gated["skipped"],
        "gated_process": proc,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="python -m tideline.bench.sleep")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--recalls", type=int, default=500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--process-runs", type=int, default=15)
    ap.add_argument("--backend", default="sqlite",
                    help="comma-separated: sqlite, postgres (SQLite first, the baseline)")
    ap.add_argument("--database", default=None,
                    help="an existing PostgreSQL URL (default: an embedded server)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the loaded stores here; later runs sleep on a copy")
    ap.add_argument("--kept", type=Path, default=None,
                    help="sleep on a copy of the stores `bench recall --keep DIR` kept")
    args = ap.parse_args(argv)
    figures: dict[str, dict[str, Any]] = {}
    for backend in parse_backends(args.backend):
        res = run(args.n, args.turns, args.recalls, args.seed,
                  process_runs=args.process_runs, backend=backend, database=args.database,
                  keep=args.keep, kept=args.kept)
        figures[backend] = res
        print(json.dumps(res, ensure_ascii=False), flush=True)
    if len(figures) > 1:
        print(json.dumps({"bench": "sleep_side_by_side", "n": args.n, "seconds": {
            b: {"full": r["full"]["s"], "incremental": r["incremental"]["s"],
                "gated_in_process_ms": r["gated_in_process_ms"],
                "gated_process_ms": r["gated_process"]["median_ms"],
                "load_memories_s": r["load"]["load_memories_s"]}
            for b, r in figures.items()}}), flush=True)


if __name__ == "__main__":
    main()
