"""The ``tideline`` console script: a lean front door before the full CLI.

``tideline sleep`` runs after every agent answer (the Stop hook, cron); when nothing
changed it is answered without importing the CLI framework (see
:mod:`tideline.sleep.__main__`). Everything else goes to :func:`tideline.cli.main`.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Run the CLI, taking the lean path for a gated ``tideline sleep``."""
    if len(sys.argv) > 1 and sys.argv[1] == "sleep":
        from tideline.sleep.__main__ import main as lean_sleep

        lean_sleep(sys.argv[2:])
        return
    from tideline.cli import main as cli_main

    cli_main()
