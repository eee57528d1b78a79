"""Bench ``tideline ui``: every page's answer time over a large store.

``python -m tideline.bench ui`` loads (or reuses, ``--keep DIR``) a synthetic store of
``--n`` memories and ``--turns`` raw turns over 120 days and four projects (the sleep
bench's generator, hashing embedder so that it loads fast; ``--sleep`` runs one sleep
so that the map has clusters), then asks each page ``--runs`` times through the app
in process (Starlette's test client: routing, the guard, the facade, the database and
the template — no network) and prints one JSON line per page with p50 and p95 in ms.
The target of issue 30 is p50 ≤ 300 ms on a two-core machine.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from tideline.bench.backends import machine
from tideline.config import Config
from tideline.embed import HashingEmbedder
from tideline.memory import Memory

__all__ = ["main", "pages", "run"]

HOST, PORT = "127.0.0.1", 8766
#: The target of issue 30: every page answers in at most this p50.
TARGET_MS = 300.0


def pages(mem: Memory, rng: random.Random, scope: str) -> dict[str, list[str]]:
    """The URLs asked of each page (a sample of real ids, sessions and days)."""
    browse = mem.browse
    newest = browse.memories(scopes=None, limit=1)
    top = newest[0].id if newest else 1
    ids = [m.id for m in (browse.memory(rng.randrange(1, top + 1)) for _ in range(200)) if m]
    last = browse.last_turn_time(None, 1e15) or time.time()
    days = [time.strftime("%Y-%m-%d", time.gmtime(last - rng.uniform(0, 100) * 86400))
            for _ in range(20)]
    scopes = browse.turn_scopes()
    sessions = [s["session"] for d in days[:5] for s in browse.sessions_between(
        scopes, time.mktime(time.strptime(d, "%Y-%m-%d")) - time.timezone,
        time.mktime(time.strptime(d, "%Y-%m-%d")) - time.timezone + 86400, limit=5)]
    words = ["deploy", "orchard", "release", "budget", "meeting", "export", "garden",
             "travel", "invoice", "schedule"]
    events = browse.events(limit=60)
    older = events[-1]["id"] if events else 1
    q = f"scope={scope}"
    return {
        "search": [f"/?{q}&q={'+'.join(rng.sample(words, 3))}" for _ in range(20)],
        "memory": [f"/memory/{i}?scope=*" for i in ids[:20]],
        "conversations": [f"/conversations?{q}&day={d}" for d in days],
        "session": [f"/session?scope=*&id={s}" for s in sessions[:20]] or ["/session?id=x"],
        "journal": [f"/journal?{q}", f"/journal?{q}&group=recalls",
                    f"/journal?{q}&before={older}", f"/journal?{q}&group=writes"],
        "conflicts": [f"/conflicts?{q}"],
        "dream": [f"/dream?{q}"],
        "map": [f"/map?{q}"],
    }


def run(home: Path, n: int, turns: int, runs: int, *, build: bool, sleep: bool,
        seed: int = 7, recalls: int = 200) -> dict[str, Any]:
    """Load (when ``build``) and time every page; returns the figures."""
    from starlette.testclient import TestClient

    from tideline.bench.sleep import build_store
    from tideline.ui.app import build_app

    loaded: dict[str, Any] = {}
    if build:
        t0 = time.perf_counter()
        loaded = build_store(home, n, turns, recalls=recalls, seed=seed, progress=False)
        loaded["load_s"] = round(time.perf_counter() - t0, 1)
    cfg = Config.load(home=home, embedder="hashing")
    rng = random.Random(seed)
    out: dict[str, Any] = {"bench": "ui", "n": n, "turns": turns, "runs": runs,
                           "machine": machine(), "load": loaded, "pages": {}}
    with Memory.open(config=cfg, embedder=HashingEmbedder(), project="proj-a") as mem:
        if sleep:
            t0 = time.perf_counter()
            mem.sleep(force=True)
            out["sleep_s"] = round(time.perf_counter() - t0, 1)
        stats = mem.store.stats()
        out["store"] = {k: stats.get(k) for k in ("memories", "turns", "sessions", "edges")}
        client = TestClient(build_app(mem, host=HOST, port=PORT),
                            base_url=f"http://{HOST}:{PORT}")
        for name, urls in pages(mem, rng, "proj-a").items():
            client.get(urls[0])  # the first answer warms caches of that page
            times = []
            for i in range(runs):
                url = urls[i % len(urls)]
                t0 = time.perf_counter()
                res = client.get(url)
                times.append((time.perf_counter() - t0) * 1000)
                if res.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {res.status_code}: {res.text[:300]}")
            times.sort()
            p50 = statistics.median(times)
            out["pages"][name] = {"p50_ms": round(p50, 1),
                                  "p95_ms": round(times[int(0.95 * (len(times) - 1))], 1),
                                  "target_met": p50 <= TARGET_MS}
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="python -m tideline.bench ui")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--turns", type=int, default=500_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--recalls", type=int, default=200,
                    help="recalls run while loading (the journal and attention they leave)")
    ap.add_argument("--sleep", action="store_true", help="sleep once first (clusters)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the loaded store here and reuse it on later runs")
    args = ap.parse_args(argv)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tideline-bench-ui-") as tmp:
        home = args.keep or Path(tmp) / "store"
        marker = home / ".bench-ui-loaded"
        build = not marker.exists()
        if build:
            print(f"loading {args.n:,} memories and {args.turns:,} turns into {home} …",
                  file=sys.stderr, flush=True)
        res = run(home, args.n, args.turns, args.runs, build=build, sleep=args.sleep,
                  seed=args.seed, recalls=args.recalls)
        if build:
            marker.write_text(json.dumps({"n": args.n, "turns": args.turns}))
    print(json.dumps(res, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
