"""One sleep: gate → lock → backup → steps → journal → marker.

* **Gated**: when nothing changed since the last full sleep (the store's change
  marker equals the stored one) and it is younger than ``refresh_after_hours``,
  the run returns ``{"skipped": true}`` at once and writes nothing.
* **Serialised across processes**: a lease in ``sleep_state`` (taken in a
  ``BEGIN IMMEDIATE`` transaction, renewed between steps, released at the end,
  taken over when its holder's process died or the lease ran out). A second
  sleep waits up to ``lock_wait_s`` and then re-checks the gate — it usually
  finds the work done and skips — or gives up with ``reason: "busy"``.
* **Backup first** through SQLite's backup API into ``<store>/backups/``
  (the newest ``backups_keep`` within ``backups_max_mb`` kept; 0 disables).
* **Steps** in order (each runnable alone with ``only``): vectors, plasticity,
  dynamics, recurrence, entities, topics, clusters, attention, backfill, scan. Each plans
  with reads and applies in short transactions that re-check row versions, so
  writes made meanwhile are never lost. A failing step is reported and the
  others still run; a step whose change would touch too much stops itself
  (``needs_force``). No step deletes a memory.
* **Journaled**: one ``sleep`` event with every step's metrics.
"""

from __future__ import annotations

import importlib
import random
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tideline.errors import InvalidInput
from tideline.models import iso
from tideline.sleep.context import SleepContext
from tideline.sleep.gate import skipped
from tideline.store.consolidation import ConsolidationStore

if TYPE_CHECKING:
    from tideline.memory import Memory

__all__ = ["STEPS", "run_sleep"]

STEPS: tuple[str, ...] = ("vectors", "plasticity", "dynamics", "recurrence", "entities",
                          "topics", "clusters", "attention", "backfill", "scan")
_MODULES = {
    "vectors": "tideline.sleep.vectors",
    "plasticity": "tideline.sleep.plasticity",
    "dynamics": "tideline.sleep.dynamics_step",
    "recurrence": "tideline.sleep.recurrence",
    "entities": "tideline.sleep.entities",
    "topics": "tideline.sleep.topics",
    "clusters": "tideline.sleep.soft_clusters",
    "attention": "tideline.sleep.attention",
    "backfill": "tideline.sleep.backfill",
    "scan": "tideline.sleep.scan",
}
_READ_ONLY = frozenset({"scan"})


def run_sleep(
    mem: Memory, *, only: str | None = None, force: bool = False, now: float | None = None,
    wait_s: float | None = None, progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run a (gated, serialised) sleep over ``mem``.

    Args:
        mem: the opened memory.
        only: run just this step (no gate, no marker update).
        force: run even if nothing changed; let guarded steps go on; rebuild clusters.
        now: the time to treat as now (tests and simulations); default the clock.
        wait_s: how long to wait for another sleep holding the lock.
        progress: called with each step's name as it starts.

    Returns:
        ``{"skipped": False, "steps": {name: metrics}, "errors", "stopped", …}`` or a
        ``{"skipped": True, "reason": …}`` result.

    Raises:
        InvalidInput: ``only`` names no step.
    """
    if only is not None and only not in STEPS:
        raise InvalidInput(f"unknown sleep step {only!r}; steps: {', '.join(STEPS)}")
    started = time.perf_counter()
    tuning = mem.config.sleep
    cons = ConsolidationStore(mem.store)
    clock = time.time() if now is None else now
    refresh = tuning.refresh_after_hours * 3600.0
    gated = only is None and not force
    if gated:
        view = cons.gate()
        if view.unchanged(refresh, clock):
            return skipped("unchanged", view, started)

    holder = uuid.uuid4().hex
    deadline = time.monotonic() + (tuning.lock_wait_s if wait_s is None else wait_s)
    waited = 0.0
    while True:
        other = cons.try_lock(holder, tuning.lock_lease_s, time.time())
        if other is None:
            break
        if time.monotonic() >= deadline:
            res = skipped("busy", cons.gate(), started)
            res["holder"] = {"pid": other.pid, "host": other.host, "expires": iso(other.expires)}
            return res
        pause = random.uniform(0.05, 0.25)  # noqa: S311 - jitter, not crypto
        time.sleep(pause)
        waited += pause
    try:
        if gated:
            view = cons.gate()
            if view.unchanged(refresh, clock):
                res = skipped("done by another sleep", view, started)
                res["waited_s"] = round(waited, 3)
                return res
        return _run_steps(mem, cons, only=only, force=force, now=clock, holder=holder,
                          progress=progress, started=started, waited=waited)
    finally:
        cons.release_lock(holder)


def _run_steps(
    mem: Memory, cons: ConsolidationStore, *, only: str | None, force: bool, now: float,
    holder: str, progress: Callable[[str], None] | None, started: float, waited: float,
) -> dict[str, Any]:
    tuning = mem.config.sleep
    before = cons.total_count()
    backup = None
    if mem.config.backups_keep > 0 and only not in _READ_ONLY:
        made = mem.store.db.backup("sleep", keep=mem.config.backups_keep,
                                   max_bytes=mem.config.backups_max_mb * 1024 * 1024)
        backup = None if made is None else str(made)  # PostgreSQL: the server's backups
    backup_ms = round((time.perf_counter() - started) * 1000, 1)
    ctx = SleepContext(mem=mem, cons=cons, tuning=tuning, dyn=mem.config.dynamics, now=now,
                       force=force, progress=progress)
    steps: dict[str, Any] = {}
    errors: dict[str, str] = {}
    stopped: dict[str, str] = {}
    for name in (only,) if only is not None else STEPS:
        if progress is not None:
            progress(name)
        t0 = time.perf_counter()
        try:
            metrics = importlib.import_module(_MODULES[name]).run(ctx)
        except Exception as exc:  # one broken step must not keep the others from running
            errors[name] = f"{type(exc).__name__}: {exc}"
            metrics = {"error": errors[name]}
        metrics["ms"] = round((time.perf_counter() - t0) * 1000, 1)
        steps[name] = metrics
        if isinstance(metrics.get("stopped"), dict):
            stopped[name] = metrics["stopped"]["reason"]
        cons.renew_lock(holder, tuning.lock_lease_s)
    after = cons.total_count()
    result: dict[str, Any] = {
        "skipped": False, "only": only, "forced": force, "at": iso(now),
        "backup": backup, "backup_ms": backup_ms, "memories": {"before": before, "after": after},
        "steps": steps, "errors": errors, "stopped": stopped, "needs_force": bool(stopped),
        "waited_s": round(waited, 3),
        "ms": round((time.perf_counter() - started) * 1000, 1),
    }
    result["event_id"] = cons.log("sleep", result, time.time())
    if only is None and not errors:
        result["marker"] = cons.mark_slept(now)
    return result
