"""``python -m tideline.sleep [--store DIR] [--namespace NS] [--json] [...]``: the lean gate.

The same command as ``tideline sleep``, for hooks and cron jobs that run it after
every answer: when nothing changed since the last sleep it answers from a
read-only look at the store without importing the CLI framework, numpy or the
embedders (tens of milliseconds for the whole process). Otherwise — or with
``--force``/``--only`` — it hands the arguments to ``tideline sleep``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def _value(args: Sequence[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def main(argv: Sequence[str] | None = None) -> None:
    """Answer a gated no-op directly, else run ``tideline sleep`` with the same arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not {"--force", "--only", "--help"} & {a.split("=", 1)[0] for a in args}:
        from tideline.config import Config
        from tideline.sleep.gate import quick_skip

        store = _value(args, "--store")
        cfg = Config.load(home=Path(store) if store else None,
                          namespace=_value(args, "--namespace"),
                          database=_value(args, "--database"))
        res = quick_skip(cfg.home, cfg.namespace, cfg.sleep.refresh_after_hours,
                         database=cfg.database)
        if res is not None:
            if "--json" in args:
                sys.stdout.write(json.dumps(res) + "\n")
            else:
                sys.stdout.write(f"sleep skipped ({res['reason']}); last sleep "
                                 f"{res['last_sleep'] or '—'}\n")
            return
    from tideline.cli import main as cli_main

    sys.argv = ["tideline", "sleep", *args]
    cli_main()


if __name__ == "__main__":
    main()
