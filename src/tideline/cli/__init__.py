"""The ``tideline`` command line: the same verbs as the Python API.

Every command that touches data takes ``--store DIR``, ``--namespace NAME`` and
``--scope NAME``, and ``--database URL`` (a ``postgresql://`` database to keep the
memory in; ``--store`` is then this host's local state); every command that
returns data takes ``--json``. Errors are one line on stderr with a distinct exit
code (see :mod:`tideline.errors`), never a traceback.
"""

from __future__ import annotations

import sys

from tideline.cli.base import (
    DISTRIBUTION,
    INTERNAL_ERROR,
    app,
    database_first,
    emit,
    fail,
    guarded,
    installed_version,
    turns_app,
)

__all__ = ["DISTRIBUTION", "INTERNAL_ERROR", "app", "database_first", "emit", "fail", "guarded",
           "installed_version", "main", "turns_app"]


def main() -> None:
    """Console-script entry point."""
    # Importing the modules registers their commands on ``app``.
    from tideline.cli import agent, archive, commands, dream, sleep, ui  # noqa: F401

    sys.argv[1:] = database_first(sys.argv[1:])
    app()
