"""What the configured URLs reach: the primary and standbys, checked by ``doctor`` and
``introspect``.

A write URL that reaches a standby (writes refused) and a read URL that reaches the
primary (reads not offloaded, the primary does the standbys' work) both work, in the
sense that nothing breaks at once, so nothing else would tell. Here each URL is
connected to once, its server's role read (``in_hot_standby``, or
``pg_is_in_recovery()``), and the primary's view of its standbys added:
``pg_stat_replication`` (state, synchronous or not, replay lag) and the settings that
decide whether an acknowledged write survives losing the primary
(``synchronous_standby_names``, ``synchronous_commit``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg

from tideline.store.postgres.replicas import role_of
from tideline.store.postgres.urls import redact_url

if TYPE_CHECKING:
    from tideline.store.postgres.connection import Database

__all__ = ["check_topology"]

_STANDBYS = ("SELECT application_name, state, sync_state, "
             "coalesce(extract(epoch FROM replay_lag) * 1000, 0)::float8 "
             "FROM pg_stat_replication ORDER BY application_name")


def _reach(url: str) -> dict[str, Any]:
    """Connect once: the role and address of the server ``url`` reaches."""
    try:
        with psycopg.connect(url, connect_timeout=5, autocommit=True) as raw:
            out: dict[str, Any] = {"role": role_of(raw),
                                   "server": f"{raw.info.host}:{raw.info.port}"}
            if out["role"] == "primary":
                out["standbys"] = [
                    {"name": n, "state": s, "sync_state": y, "replay_lag_ms": round(lag, 1)}
                    for n, s, y, lag in raw.execute(_STANDBYS).fetchall()]
                out["synchronous_standby_names"] = raw.execute(
                    "SHOW synchronous_standby_names").fetchone()[0]  # type: ignore[index]
                out["synchronous_commit"] = raw.execute(
                    "SHOW synchronous_commit").fetchone()[0]  # type: ignore[index]
            else:
                row = raw.execute("SELECT pg_last_wal_replay_lsn()::text, "
                                  "extract(epoch FROM now() - "
                                  "pg_last_xact_replay_timestamp())").fetchone()
                out["replayed_lsn"] = row[0] if row else None
                out["hot_standby_feedback"] = raw.execute(
                    "SHOW hot_standby_feedback").fetchone()[0]  # type: ignore[index]
            return out
    except psycopg.Error as exc:
        return {"role": "unreachable", "error": " ".join(str(exc).split())[:300]}


def check_topology(db: Database) -> dict[str, Any]:
    """Where the write URL and the read URL lead, and what is wrong with it.

    Args:
        db: the store's database (its write URL and read route).

    Returns:
        ``{"write": {...}, "read": {...} | None, "routed", "read_only", "problems":
        [...], "warnings": [...]}``; a problem is a misconfiguration (the write URL at a
        standby, the read URL at the primary, a URL that reaches nothing).
    """
    problems: list[str] = []
    warnings: list[str] = []
    write = {"url": db.path, **_reach(db.url)}
    if write["role"] == "standby":
        problems.append(f"replication: TIDELINE_DATABASE_URL reaches a standby "
                        f"({write['server']}): writes are refused; point it at the primary "
                        "or list every host with target_session_attrs=read-write")
    elif write["role"] == "unreachable":
        problems.append(f"replication: no primary answers at {db.path} "
                        f"({write.get('error', '')})")
    elif write.get("synchronous_standby_names") in ("", None) and write.get("standbys"):
        warnings.append("replication: the standbys are asynchronous "
                        "(synchronous_standby_names is empty): a write acknowledged just "
                        "before the primary dies can be lost in a failover")
    route = db.route
    read: dict[str, Any] | None = None
    if route is not None:
        read = {"url": redact_url(route.endpoint.url), "routed": route.routed,
                **_reach(route.endpoint.url), **route.stats}
        if route.routed and read["role"] == "primary":
            problems.append(f"replication: the read URL reaches the primary "
                            f"({read['server']}), not a standby: recalls are not offloaded; "
                            "point TIDELINE_DATABASE_READ_URL at the standbys")
        elif route.routed and read["role"] == "unreachable":
            warnings.append(f"replication: the read URL reaches no server "
                            f"({read.get('error', '')}): reads go to the primary")
    return {"write": write, "read": read, "routed": bool(route and route.routed),
            "read_only": db.read_only(), "problems": problems, "warnings": warnings}
