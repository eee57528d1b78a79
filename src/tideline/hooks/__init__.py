"""Agent-runtime hooks: Claude Code's SessionStart, UserPromptSubmit, Stop, PreCompact, SessionEnd.

Run as ``python -m tideline.hooks <event>`` (the fast entry the installer writes:
it skips the CLI framework) or ``tideline hook <event>``; both read the hook's JSON
payload on stdin and call :func:`tideline.hooks.claude.run_hook`. Install them
into Claude Code's settings with ``tideline install claude``.
"""

from __future__ import annotations

__all__ = ["EVENTS"]

from tideline.hooks.claude import EVENTS
