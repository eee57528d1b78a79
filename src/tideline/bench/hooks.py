"""Claude Code hooks as whole processes: ``python -m tideline.bench hooks [--runs 10]``.

Every figure is the wall time of one ``python -m tideline.hooks <event>`` process, with
Claude Code's JSON on stdin, median of ``--runs`` rounds, next to a bare
``python -c "import sqlite3, json"`` timed in the same rounds (interleaved, so machine
load hits both alike). A round:

1. no warm server; ``session-start`` (it spawns the warm prefetch server);
2. ``prompt`` at once — as ``claude -p`` sends it, while the server still loads the
   model (``first_prompt_at_once``: the hook waits for it);
3. three more prompts (``later_prompt``);
4. the server stopped; ``session-start`` again, the server given the time a user
   takes to type (until it answers a ping, then ``TYPING_S`` more; not timed), then the
   first prompt (``first_prompt``: the session's first UserPromptSubmit served warm);
5. in that warm session, the first Chinese prompt (``first_cjk_prompt``: the warm
   process loaded jieba's dictionary on a thread once its socket answered, since the
   store holds Chinese text; a prompt sent at once would share that load);
6. with ``TIDELINE_WARM=off``, one prompt that loads the model in its own process
   (``prompt_in_process``: what every first prompt cost before the wait), and one
   Chinese prompt the same way (``cjk_prompt_in_process``: the model and jieba);
7. a process whose first query is Chinese, query analysis only
   (``cjk_terms_in_process``: what loading jieba costs a fresh process).

The store: the default embedder (e5) unless ``--embedder``, ``--memories`` facts and a
few raw turns in project ``atlas``. Prints one JSON line: medians in milliseconds, each
as a multiple of the bare start, how each prompt was served (from the journal), and the
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "run"]

TARGETS = {"first_prompt": 8.0, "later_prompt": 6.0, "session_start": 6.0}
QUERIES = ["how do I add a column to the atlas loader?", "which database does atlas use?",
           "what broke the nightly export last time?", "who reviews schema migrations?",
           "why did we pin the CSV parser?", "when do deploys happen?"]
FACTS = ["The atlas loader needs schema.yaml updated for every new column",
         "atlas runs PostgreSQL 16 behind PgBouncer on pg-atlas-01",
         "The nightly export broke when the region column was added",
         "Mira reviews every schema migration before it is merged",
         "We pinned the CSV parser after a locale bug split decimals",
         "Deploys happen on Tuesdays at 11:00, never on Fridays"]
CJK_FACTS = ["atlas 的数据库是 pg-atlas-01 上的 PostgreSQL 16",
             "夜间导出在新增 region 列之后失败了"]
CJK_QUERIES = ["atlas 用的是哪个数据库？", "夜间导出为什么失败？"]


def _seed(store: Path, embedder: str, n: int) -> None:
    from tideline.memory import Memory

    mem = Memory.open(store, embedder=embedder, project="atlas")
    try:
        for i in range(n):
            base = FACTS[i % len(FACTS)]
            text = base if i < len(FACTS) else f"{base} (note {i}: ticket ATL-{1000 + i})"
            mem.write(text, scope="atlas", importance=3 + i % 3, emotional=2 + i % 4,
                      recurrence=1 + i % 5, unresolved=1 + i % 3, tags=["atlas"])
        for text in CJK_FACTS:
            mem.write(text, scope="atlas", tags=["atlas"])
        mem.capture_turns([
            {"id": f"t-{k}", "session": "earlier", "role": role, "speaker": role,
             "text": text, "timestamp": 1_790_000_000 + k * 60}
            for k, (role, text) in enumerate([
                ("user", "The loader fails with E1234 on the new CSV column."),
                ("assistant", "The region column is not mapped in schema.yaml."),
                ("user", "Map it and rerun the nightly export."),
                ("assistant", "Done: E1234 is gone and the export ran.")])],
            source="bench", scope="atlas")
    finally:
        mem.close()


def _timed(argv: list[str], payload: dict[str, Any] | None, env: dict[str, str],
           cwd: Path) -> float:
    data = json.dumps(payload) if payload is not None else ""
    started = time.perf_counter()
    proc = subprocess.run(argv, input=data, capture_output=True, text=True, env=env,  # noqa: S603
                          cwd=cwd, timeout=300, check=False)
    took = (time.perf_counter() - started) * 1000
    if proc.returncode != 0 or proc.stderr.strip():
        raise RuntimeError(f"{argv[-1]} failed: {proc.stderr.strip()[:500]}")
    return took


#: The seconds a user takes to type a session's first prompt after the server answers,
#: at the least: the warm process's work behind its socket (jieba) has that long.
TYPING_S = 2.0


def _wait_alive(store: Path, namespace: str, limit: float = 120.0) -> None:
    from tideline.hooks import warm

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if warm.alive(store, namespace):
            return
        time.sleep(0.1)
    raise RuntimeError("the warm server did not come up")


def run(runs: int = 10, *, embedder: str = "e5", memories: int = 120) -> dict[str, Any]:
    """Run the rounds and return the figures (see the module docstring)."""
    from tideline.hooks import warm
    from tideline.memory import Memory

    with tempfile.TemporaryDirectory(prefix="tideline-bench-hooks-") as tmp:
        root = Path(tmp)
        store, repo = root / "store", root / "atlas"
        (repo / ".git").mkdir(parents=True)
        _seed(store, embedder, memories)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TIDELINE_", "CLAUDE_"))}
        env.update(TIDELINE_HOME=str(store), TIDELINE_WARM="always", TIDELINE_WARM_IDLE="600",
                   OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"))
        cold_env = env | {"TIDELINE_WARM": "off"}
        hook = [sys.executable, "-m", "tideline.hooks"]
        bare = [sys.executable, "-c", "import sqlite3, json"]
        times: dict[str, list[float]] = {k: [] for k in (
            "bare", "session_start", "first_prompt_at_once", "later_prompt", "first_prompt",
            "first_cjk_prompt", "prompt_in_process", "cjk_prompt_in_process",
            "cjk_terms_in_process")}
        cjk_terms = [sys.executable, "-c",
                     f"from tideline.text import query_terms; query_terms({CJK_QUERIES[0]!r})"]

        def payload(event: str, session: str, **extra: Any) -> dict[str, Any]:
            return {"session_id": session, "cwd": str(repo), "hook_event_name": event,
                    "transcript_path": str(root / f"{session}.jsonl")} | extra

        for r in range(runs):
            session = f"bench-{r}"
            warm.stop(store, "default")
            times["bare"].append(_timed(bare, None, env, repo))
            times["session_start"].append(_timed([*hook, "session-start"], payload(
                "SessionStart", session, source="startup"), env, repo))
            times["first_prompt_at_once"].append(_timed([*hook, "prompt"], payload(
                "UserPromptSubmit", session, prompt=QUERIES[r % len(QUERIES)]), env, repo))
            for k in range(1, 4):
                times["later_prompt"].append(_timed([*hook, "prompt"], payload(
                    "UserPromptSubmit", session, prompt=QUERIES[(r + k) % len(QUERIES)]),
                    env, repo))
            times["bare"].append(_timed(bare, None, env, repo))
            warm.stop(store, "default")
            session = f"bench-{r}-typed"
            times["session_start"].append(_timed([*hook, "session-start"], payload(
                "SessionStart", session, source="startup"), env, repo))
            _wait_alive(store, "default")
            time.sleep(TYPING_S)
            times["first_prompt"].append(_timed([*hook, "prompt"], payload(
                "UserPromptSubmit", session, prompt=QUERIES[(r + 4) % len(QUERIES)]),
                env, repo))
            times["first_cjk_prompt"].append(_timed([*hook, "prompt"], payload(
                "UserPromptSubmit", session, prompt=CJK_QUERIES[r % len(CJK_QUERIES)]),
                env, repo))
            warm.stop(store, "default")
            times["prompt_in_process"].append(_timed([*hook, "prompt"], payload(
                "UserPromptSubmit", f"bench-{r}-cold", prompt=QUERIES[r % len(QUERIES)]),
                cold_env, repo))
            times["cjk_prompt_in_process"].append(_timed([*hook, "prompt"], payload(
                "UserPromptSubmit", f"bench-{r}-cold-cjk",
                prompt=CJK_QUERIES[r % len(CJK_QUERIES)]), cold_env, repo))
            times["cjk_terms_in_process"].append(_timed(cjk_terms, None, env, repo))
        warm.stop(store, "default")
        mem = Memory.open(store)
        try:
            served: dict[str, int] = {}
            waited: list[float] = []
            for e in mem.events(kinds=["inject"], limit=10_000, all_scopes=True):
                data = e["data"]
                if data.get("kind") == "prefetch":
                    key = str(data.get("served_by"))
                    served[key] = served.get(key, 0) + 1
                    if float(data.get("waited_ms") or 0) >= 1.0:  # the at-once prompts
                        waited.append(float(data["waited_ms"]))
        finally:
            mem.close()
    base = statistics.median(times["bare"])
    figures = {k: {"median_ms": round(statistics.median(v), 1),
                   "min_ms": round(min(v), 1), "n": len(v),
                   "x_bare": round(statistics.median(v) / base, 2)}
               for k, v in times.items()}
    return {
        "bench": "hooks", "embedder": embedder, "memories": memories, "runs": runs,
        "figures": figures,
        "targets": {k: {"max_x_bare": t, "met": figures[k]["x_bare"] <= t}
                    for k, t in TARGETS.items()},
        "served_by": served,
        "waited": {"prompts": len(waited),
                   "median_ms": round(statistics.median(waited), 1) if waited else 0.0,
                   "max_ms": round(max(waited), 1) if waited else 0.0},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform(), "load": list(os.getloadavg())},
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="python -m tideline.bench hooks")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--embedder", default="e5")
    ap.add_argument("--memories", type=int, default=120)
    args = ap.parse_args(argv)
    if args.runs < 1 or args.memories < 1:
        ap.error("--runs and --memories must be at least 1")
    print(json.dumps(run(args.runs, embedder=args.embedder, memories=args.memories),
                     ensure_ascii=False))


if __name__ == "__main__":
    main()
