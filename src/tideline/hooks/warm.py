"""A warm prefetch process, so the per-prompt hook does not load the model each time.

Embedding the prompt is the one costly step of the ``prompt`` hook: a fresh process
loads the model (seconds on a small CPU) before it can embed a single query. The
``session-start`` hook therefore starts, in the background, one small server per
store and namespace that keeps a :class:`~tideline.Memory` (and its model) open; the
``prompt`` hook asks it over a Unix socket and falls back to doing the work itself
when it is absent, busy, stale or broken. The answer is the same either way — the
server calls the same :meth:`Memory.inject_prefetch`.

* The socket lives in a private directory (``$XDG_RUNTIME_DIR`` or the temp dir,
  ``tideline-<uid>/``, mode 0700); only the same user can connect.
* One server per store: an exclusive ``flock`` on a lock file beside the socket.
* It exits after ``$TIDELINE_WARM_IDLE`` seconds without a request (default 1800),
  when the store's embedder changes, or when the client's Tideline version differs.
* ``TIDELINE_WARM``: ``auto`` (default) starts it only for stores whose embedder loads a
  model (e5, http), ``always`` for any store, ``0``/``off`` never (the prompt hook then
  always works in-process).

Run by hand: ``python -m tideline.hooks.warm --store DIR [--namespace NAME]``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["alive", "ask", "enabled", "mode", "serve", "socket_path", "spawn", "wanted"]

ENV_SWITCH = "TIDELINE_WARM"
ENV_IDLE = "TIDELINE_WARM_IDLE"
DEFAULT_IDLE_S = 1800.0
MAX_MESSAGE = 1024 * 1024


def mode() -> str:
    """``off``, ``auto`` (default: only for stores whose embedder loads a model) or ``always``."""
    value = (os.environ.get(ENV_SWITCH) or "auto").strip().lower()
    if not hasattr(socket, "AF_UNIX") or value in ("0", "false", "no", "off"):
        return "off"
    return "always" if value in ("1", "true", "yes", "on", "always") else "auto"


def enabled() -> bool:
    """Whether warm prefetch may be used at all (``TIDELINE_WARM`` is not off)."""
    return mode() != "off"


def wanted(home: Path) -> bool:
    """Whether a warm server is worth starting for this store.

    In ``auto`` mode only when the store's embedder loads a model (not ``hashing``).
    """
    current = mode()
    if current != "auto":
        return current == "always"
    from tideline.store.connection import peek_meta

    marker = peek_meta(home, "embedder") or (os.environ.get("TIDELINE_EMBEDDER") or "e5")
    return not marker.startswith("hashing")


def socket_path(home: Path, namespace: str) -> Path:
    """The socket of the warm server for one store and namespace (short, per user)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    uid = os.getuid() if hasattr(os, "getuid") else 0
    key = hashlib.sha256(f"{Path(home).expanduser().resolve()}\x1f{namespace}".encode())
    return Path(base) / f"tideline-{uid}" / f"warm-{key.hexdigest()[:20]}.sock"


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
        raise PermissionError(f"{path} must be a private directory owned by this user")


def _send(conn: socket.socket, data: dict[str, Any]) -> None:
    conn.sendall(json.dumps(data, ensure_ascii=False, default=str).encode("utf-8") + b"\n")


def _receive(conn: socket.socket) -> dict[str, Any]:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n") or size > MAX_MESSAGE:
            break
    if size > MAX_MESSAGE:
        raise ValueError("message too large")
    data = json.loads(b"".join(chunks).decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    return data


def ask(home: Path, namespace: str, request: dict[str, Any], *,
        timeout: float = 20.0) -> dict[str, Any] | None:
    """Send one request to the warm server; None when there is none or it failed."""
    if not enabled():
        return None
    path = socket_path(home, namespace)
    if not path.exists():
        return None
    from tideline import __version__

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(0.5)
            conn.connect(str(path))
            conn.settimeout(timeout)
            _send(conn, {"version": __version__} | request)
            answer = _receive(conn)
    except (OSError, ValueError):
        return None
    return answer if answer.get("ok") else None


def alive(home: Path, namespace: str) -> bool:
    """Whether a warm server answers on the socket."""
    return ask(home, namespace, {"op": "ping"}, timeout=2.0) is not None


def spawn(home: Path, namespace: str) -> bool:
    """Start the warm server in the background unless one runs; returns True if started."""
    if not wanted(home) or alive(home, namespace):
        return False
    cmd = [sys.executable, "-m", "tideline.hooks.warm", "--store", str(home),
           "--namespace", namespace]
    # One query at a time: a single engine thread answers fastest and never spin-waits
    # against the agent's own work for the CPU.
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("TIDELINE_EMBED_THREADS", "1")
    kwargs: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL,
                              "stderr": subprocess.DEVNULL, "close_fds": True, "env": env}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    subprocess.Popen(cmd, **kwargs)  # noqa: S603 - our own interpreter and module
    return True


def _answer(mem: Any, request: dict[str, Any]) -> dict[str, Any]:
    from tideline.errors import TidelineError
    from tideline.project import ProjectInfo

    op = request.get("op")
    if op == "ping":
        return {"ok": True, "pid": os.getpid()}
    if op != "prefetch":
        return {"ok": False, "error": f"unknown op {op!r}"}
    info = request.get("project") or {}
    try:
        mem.use_project(ProjectInfo(info.get("name"), str(info.get("rule") or "explicit"),
                                    str(info.get("source") or "")))
        result = mem.inject_prefetch(str(request.get("query") or ""),
                                     session=request.get("session") or None,
                                     recent=request.get("recent") or "bridge")
    except TidelineError as exc:
        return {"ok": True, "error": {"code": exc.code, "message": str(exc)}}
    return {"ok": True, "result": result.to_dict()}


def serve(home: Path, namespace: str, *, idle: float | None = None) -> int:
    """Run the warm server until idle; returns the exit status."""
    import fcntl

    from tideline import __version__
    from tideline.memory import Memory
    from tideline.store.connection import peek_meta

    path = socket_path(home, namespace)
    _private_dir(path.parent)
    lock = open(path.with_suffix(".lock"), "a+")  # noqa: SIM115 - held for the lifetime
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another warm server owns this store
    idle_s = idle if idle is not None else float(os.environ.get(ENV_IDLE) or DEFAULT_IDLE_S)
    mem = Memory.open(home, namespace=namespace)
    mem.embedder.embed_query("warm up")  # load the model before the first prompt arrives
    marker = mem.embedder.marker
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        os.chmod(path, 0o600)
        server.listen(8)
        last = time.monotonic()
        while True:
            server.settimeout(max(1.0, min(30.0, idle_s)))
            try:
                conn, _ = server.accept()
            except TimeoutError:
                if time.monotonic() - last > idle_s:
                    return 0
                continue
            last = time.monotonic()
            with conn:
                conn.settimeout(10.0)
                try:
                    request = _receive(conn)
                except (OSError, ValueError):
                    continue
                if request.get("version") != __version__ or \
                        peek_meta(home, "embedder") not in (None, marker):
                    with contextlib.suppress(OSError):
                        _send(conn, {"ok": False, "error": "stale"})
                    return 0
                with contextlib.suppress(OSError):
                    _send(conn, _answer(mem, request))
    finally:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        mem.close()
        lock.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m tideline.hooks.warm --store DIR [--namespace NAME] [--idle SECONDS]``."""
    import argparse

    from tideline.config import Config

    parser = argparse.ArgumentParser(prog="python -m tideline.hooks.warm")
    parser.add_argument("--store", type=Path, default=None)
    parser.add_argument("--namespace", default=None)
    parser.add_argument("--idle", type=float, default=None)
    args = parser.parse_args(argv)
    config = Config.load(home=args.store, namespace=args.namespace)
    return serve(config.home, config.namespace, idle=args.idle)


if __name__ == "__main__":
    sys.exit(main())
