"""A warm prefetch process, so the per-prompt hook does not load the model each time.

Embedding the prompt is the one costly step of the ``prompt`` hook: a fresh process
loads the model (seconds on a small CPU) before it can embed a single query. The
``session-start`` hook therefore starts, in the background, one small server per
store and namespace that keeps a :class:`~tideline.Memory` (and its model) open; the
``prompt`` hook asks it over a Unix socket and falls back to doing the work itself
when it is absent, busy, stale or broken. The answer is the same either way — the
server calls the same :meth:`Memory.inject_prefetch`.

The first prompt of a session usually arrives while that server is still loading the
model. ``session-start`` leaves a *starting* marker (the child's pid) beside the
socket; while it is there and the child lives, the ``prompt`` hook waits for the socket
— at most ``$TIDELINE_WARM_WAIT`` seconds (default 10) — instead of loading the model a
second time in its own process. The server loads the model and runs one unlogged
prefetch (index, full-text pages) before it opens the socket, so the first answer is as
quick as the later ones.

* The socket lives in a private directory (``$XDG_RUNTIME_DIR`` or the temp dir,
  ``tideline-<uid>/``, mode 0700); only the same user can connect.
* One server per store: an exclusive ``flock`` on a lock file beside the socket.
* It exits after ``$TIDELINE_WARM_IDLE`` seconds without a request (default 1800),
  when the store's embedder changes, when the client's Tideline version differs, or on
  a ``stop`` request (:func:`stop`; ``tideline uninstall claude`` sends it).
* ``TIDELINE_WARM``: ``auto`` (default) starts it only for stores whose embedder loads a
  model (e5, http), ``always`` for any store, ``0``/``off`` never (the prompt hook then
  always works in-process).
* On PostgreSQL (``$TIDELINE_DATABASE_URL``) the store's embedder marker is read from the
  database, not from the local directory (which holds no database then): both for the
  ``auto`` choice and for the server's check that the embedder has not changed. The URL
  reaches the server through its environment, never its command line.

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
import threading
import time
from pathlib import Path
from typing import Any

from tideline.processes import pid_alive

__all__ = ["alive", "ask", "enabled", "mode", "serve", "socket_path", "spawn", "stop",
           "wait_ready", "wanted"]

ENV_SWITCH = "TIDELINE_WARM"
ENV_IDLE = "TIDELINE_WARM_IDLE"
ENV_WAIT = "TIDELINE_WARM_WAIT"
DEFAULT_IDLE_S = 1800.0
DEFAULT_WAIT_S = 10.0
#: How long a new server tries for the store's lock (a prompt hook may probe it briefly).
LOCK_PATIENCE_S = 2.0
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


def wanted(home: Path, *, database: str | None = None) -> bool:
    """Whether a warm server is worth starting for this store.

    In ``auto`` mode only when the store's embedder loads a model (not ``hashing``).

    Args:
        home: the store directory.
        database: the store's ``postgresql://`` URL (None: the SQLite file in ``home``).

    Raises:
        BackendUnavailable: the URL names a backend this installation lacks.
    """
    current = mode()
    if current != "auto":
        return current == "always"
    from tideline.store import peek_meta

    marker = (peek_meta(home, "embedder", database=database)
              or os.environ.get("TIDELINE_EMBEDDER") or "e5")
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


def _request(path: Path, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
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


def ask(home: Path, namespace: str, request: dict[str, Any], *,
        timeout: float = 20.0) -> dict[str, Any] | None:
    """Send one request to the warm server; None when there is none or it failed."""
    if not enabled():
        return None
    path = socket_path(home, namespace)
    if not path.exists():
        return None
    return _request(path, request, timeout)


def alive(home: Path, namespace: str) -> bool:
    """Whether a warm server answers on the socket."""
    return ask(home, namespace, {"op": "ping"}, timeout=2.0) is not None


def _marker(home: Path, namespace: str) -> Path:
    return socket_path(home, namespace).with_suffix(".starting")


def _starting_pid(home: Path, namespace: str) -> int | None:
    """The pid of a server that was spawned and has not opened its socket yet."""
    try:
        pid = int(_marker(home, namespace).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    return pid if pid > 0 and pid_alive(pid) else None


def wait_ready(home: Path, namespace: str, *, limit: float | None = None) -> bool:
    """Wait (bounded) for a server that ``session-start`` spawned to open its socket.

    Returns at once when the socket is there, or when no server is starting.

    Args:
        home: the store directory.
        namespace: the namespace.
        limit: the longest wait in seconds (default ``$TIDELINE_WARM_WAIT`` or 10).

    Returns:
        Whether the socket is there now.
    """
    if not enabled():
        return False
    path = socket_path(home, namespace)
    if path.exists():
        return True
    pid = _starting_pid(home, namespace)
    if pid is None:
        return False
    if limit is None:
        try:
            limit = float(os.environ.get(ENV_WAIT) or DEFAULT_WAIT_S)
        except ValueError:
            limit = DEFAULT_WAIT_S
    deadline = time.monotonic() + max(0.0, limit)
    step = 0.005
    while time.monotonic() < deadline:
        if path.exists():
            return True
        if not pid_alive(pid):
            return path.exists()
        time.sleep(step)
        step = min(0.05, step * 1.5)
    return path.exists()


def spawn(home: Path, namespace: str, *, database: str | None = None) -> bool:
    """Start the warm server in the background unless one runs; returns True if started.

    Args:
        home: the store directory.
        namespace: the namespace it serves.
        database: the store's ``postgresql://`` URL (None: the SQLite file in ``home``).

    Raises:
        BackendUnavailable: the URL names a backend this installation lacks.
    """
    if not wanted(home, database=database) or _starting_pid(home, namespace) is not None or \
            alive(home, namespace):
        return False
    cmd = [sys.executable, "-m", "tideline.hooks.warm", "--store", str(home),
           "--namespace", namespace]
    # One query at a time: a single engine thread answers fastest and never spin-waits
    # against the agent's own work for the CPU.
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("TIDELINE_EMBED_THREADS", "1")
    if database:  # in the environment: a password in argv is visible to every user
        env["TIDELINE_DATABASE_URL"] = database
    kwargs: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL,
                              "stderr": subprocess.DEVNULL, "close_fds": True, "env": env}
    if os.name == "posix":
        kwargs["start_new_session"] = True
    marker = _marker(home, namespace)
    _private_dir(marker.parent)
    child = subprocess.Popen(cmd, **kwargs)  # noqa: S603 - our own interpreter and module
    # The first prompt hook reads this to wait for the socket instead of loading the model.
    tmp = marker.with_name(f".{marker.name}.{os.getpid()}")
    tmp.write_text(str(child.pid), encoding="ascii")
    os.replace(tmp, marker)
    return True


def stop(home: Path, namespace: str, *, timeout: float = 15.0) -> int | None:
    """Stop the warm server of a store (also one still starting); returns its pid or None.

    Works whatever ``TIDELINE_WARM`` says, and on a server of another Tideline version
    (which steps down on any request of this one).
    """
    path = socket_path(home, namespace)
    deadline = time.monotonic() + timeout
    pid = _starting_pid(home, namespace)
    while pid is not None and not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # still loading the model: it answers once its socket is open
        if not pid_alive(pid):
            break
    # A server of another version answers "stale" to any request, and steps down too.
    answer = _request(path, {"op": "stop"}, 5.0) if path.exists() else None
    stopped = int(answer["pid"]) if answer and "pid" in answer else pid
    if stopped is None:
        return None
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return stopped


def _answer(mem: Any, request: dict[str, Any]) -> dict[str, Any]:
    from tideline.errors import TidelineError
    from tideline.project import ProjectInfo

    op = request.get("op")
    if op in ("ping", "stop"):
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


def _speaks_cjk(mem: Any) -> bool:
    """Whether the store's recent memories hold Chinese, Japanese or Korean text."""
    from tideline.text import has_cjk

    return any(has_cjk(r.text) for r in mem.store.list_memories(limit=200))


def _preload_segmenter_behind() -> threading.Thread:
    """Load the CJK segmenter on a thread, once the socket already answers.

    Its dictionary costs over half a second even from jieba's cache. Loaded before the
    socket opened, it made every first prompt wait for it, an English one too; loaded
    behind, a first English prompt does not wait, and a first Chinese one waits only for
    what is left of the load (the segmenter's lock), not for a second load of its own.
    A store without CJK text never pays it, nor its memory.
    """
    from tideline.text import preload_segmenter

    loader = threading.Thread(target=preload_segmenter, name="tideline-segmenter",
                              daemon=True)
    loader.start()
    return loader


def _clear_marker(home: Path, namespace: str) -> None:
    marker = _marker(home, namespace)
    try:
        if int(marker.read_text(encoding="ascii").strip()) != os.getpid():
            return  # a newer spawn's marker
    except (OSError, ValueError):
        return
    with contextlib.suppress(FileNotFoundError):
        marker.unlink()


def serve(home: Path, namespace: str, *, idle: float | None = None,
          database: str | None = None) -> int:
    """Run the warm server until idle; returns the exit status.

    Args:
        home: the store directory.
        namespace: the namespace to serve.
        idle: seconds without a request before it exits (default ``$TIDELINE_WARM_IDLE``).
        database: the store's ``postgresql://`` URL (None: ``$TIDELINE_DATABASE_URL``, else
            the SQLite file in ``home``).

    Raises:
        TidelineError: the store cannot be opened.
    """
    import fcntl

    from tideline import __version__
    from tideline.memory import Memory
    from tideline.store import peek_meta

    path = socket_path(home, namespace)
    _private_dir(path.parent)
    lock = open(path.with_suffix(".lock"), "a+")  # noqa: SIM115 - held for the lifetime
    patience = time.monotonic() + LOCK_PATIENCE_S
    while True:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > patience:
                lock.close()
                _clear_marker(home, namespace)
                return 0  # another warm server owns this store
            time.sleep(0.05)
    idle_s = idle if idle is not None else float(os.environ.get(ENV_IDLE) or DEFAULT_IDLE_S)
    try:
        mem = Memory.open(home, namespace=namespace, database=database)
        # Load the model, the vector index and the full-text pages before the first prompt
        # arrives: one prefetch that journals nothing.
        mem.embedder.embed_query("warm up")
        from tideline.errors import TidelineError

        with contextlib.suppress(TidelineError):  # a warm-up, not an answer anyone waits for
            mem.inject_prefetch("warm up", recent="bridge", log=False)
        cjk = _speaks_cjk(mem)
    except BaseException:
        _clear_marker(home, namespace)
        lock.close()
        raise
    marker = mem.embedder.marker
    where = mem.config.database  # the embedder is the store's: read it where the store is
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        os.chmod(path, 0o600)
        server.listen(8)
        _clear_marker(home, namespace)
        if cjk:
            _preload_segmenter_behind()
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
                        peek_meta(home, "embedder", database=where) not in (None, marker):
                    with contextlib.suppress(OSError):
                        _send(conn, {"ok": False, "error": "stale"})
                    return 0
                with contextlib.suppress(OSError):
                    _send(conn, _answer(mem, request))
                if request.get("op") == "stop":
                    return 0
    finally:
        _clear_marker(home, namespace)
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
    return serve(config.home, config.namespace, idle=args.idle, database=config.database)


if __name__ == "__main__":
    sys.exit(main())
