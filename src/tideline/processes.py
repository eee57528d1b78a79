"""Whether a process of this host still runs: a sleep lease's holder, a warm hook
server, a benchmark that holds an embedded PostgreSQL server."""

from __future__ import annotations

import os

__all__ = ["pid_alive"]


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` of this host exists (another user's counts too).

    Args:
        pid: the process id.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; it is only not ours to signal
    return True
