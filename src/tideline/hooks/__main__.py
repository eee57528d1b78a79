"""``python -m tideline.hooks <event> [--store DIR] [--namespace NAME]``: the fast hook entry.

It avoids the CLI framework (typer/rich) and, for ``session-start`` and a
``stop`` with nothing new, everything that imports numpy, so the whole process
stays cheap. Always exits 0; a failure is one line on stderr.
"""

from __future__ import annotations

import sys

USAGE = ("usage: python -m tideline.hooks {session-start|prompt|stop|pre-compact|session-end} "
         "[--store DIR] [--namespace NAME]")


def main(argv: list[str] | None = None) -> int:
    """Run one hook with the payload on stdin; returns the exit status (always 0)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 0
    event, rest = args[0], args[1:]
    overrides: dict[str, str] = {}
    while rest:
        flag = rest.pop(0)
        if flag in ("--store", "--namespace") and rest:
            overrides["home" if flag == "--store" else "namespace"] = rest.pop(0)
        else:
            print(f"tideline hook {event}: ignoring unknown argument {flag!r}", file=sys.stderr)
    from tideline.config import Config
    from tideline.hooks.claude import run_hook

    try:
        config = Config.load(**overrides)
    except Exception as exc:  # bad TIDELINE_* settings must not break the agent either
        print(f"tideline hook {event}: settings: {exc}", file=sys.stderr)
        return 0
    raw = sys.stdin.read() if not sys.stdin.isatty() else ""
    outcome = run_hook(event, raw, config)
    if outcome.stdout:
        sys.stdout.write(outcome.stdout + "\n")
        sys.stdout.flush()
    if outcome.stderr:
        print(outcome.stderr, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
