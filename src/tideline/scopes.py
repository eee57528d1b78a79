"""The scope policy: which scope a write goes to and which scopes a read may answer from.

One rule for every surface (the facade, injection, sleep, dream): a project sees
itself and ``global``; with no project, only ``global``. A write with no scope goes
to the current project, except the kinds that hold everywhere (who the user is and
what they like does not change from one repository to the next). Pure functions,
no imports beyond the standard library, so the lean hook paths can use them.
"""

from __future__ import annotations

__all__ = ["GLOBAL", "GLOBAL_KINDS", "default_scope", "visible_scopes"]

#: The scope every project sees.
GLOBAL = "global"

#: Kinds that hold everywhere: a write of one of them with no scope goes to ``global``,
#: not to the detected project (who the user is and what they like does not change from
#: one repository to the next). Self-concept and profiles are not scoped at all.
GLOBAL_KINDS = ("preference", "identity")


def default_scope(project: str | None, *, write: bool, kind: str | None = None) -> str:
    """The scope of a read or write that names none: the project, else ``global``.

    Args:
        project: the current project (None: no project).
        write: the scope of a write (then ``kind`` may send it to ``global``).
        kind: the kind written.
    """
    if write and kind in GLOBAL_KINDS:
        return GLOBAL
    return project or GLOBAL


def visible_scopes(scope: str | None) -> list[str]:
    """The scopes a read on behalf of ``scope`` answers from: it and ``global``.

    Args:
        scope: a project name, ``global``, or None for no project (only ``global``).
    """
    return list(dict.fromkeys([scope or GLOBAL, GLOBAL]))
