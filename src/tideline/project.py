"""Project detection: which project scope an agent is working in.

The rules, first match wins (each one names itself in :attr:`ProjectInfo.rule`)::

    TIDELINE_PROJECT     an explicit project name
    CLAUDE_PROJECT_DIR   Claude Code's project directory (set for hooks)
    TERMINAL_CWD         Hermes Agent's configured working directory
    ZCODE_PROJECT_DIR    ZCode's project directory
    git_root             the name of the git work tree that holds the directory
    cwd                  the directory's own name
    none                 nothing usable (the home directory or ``/``): ``global``

``TIDELINE_PROJECT=global`` (or an explicit ``global``) turns detection off: no
project, only ``global``. Every surface — the CLI, :meth:`tideline.Memory.open`,
the MCP server, the Claude Code hooks, the Hermes plugin — detects with
:func:`detect_project`; the transcript importers name each imported line with
:func:`project_for_directory` (the same rules, with the directory the line was
written in standing for the client's directory).

A directory found through a client variable is named after the git work tree
that holds it, else after itself, so ``~/src/atlas/api`` and ``~/src/atlas``
are one project. Names are made safe for a scope (``[\\w .:@/+-]``). Detection
only reads the environment and walks parent directories: no subprocess, so a
hook can afford it.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["CLIENT_DIR_VARS", "GLOBAL", "ProjectInfo", "current_project", "detect_project",
           "project_for_directory", "project_name_for"]

#: Client variables that carry a project directory, in the order they are tried.
CLIENT_DIR_VARS = ("CLAUDE_PROJECT_DIR", "TERMINAL_CWD", "ZCODE_PROJECT_DIR")
#: The scope shared by every project; naming it as the project means "no project".
GLOBAL = "global"
_UNSAFE = re.compile(r"[^\w .:@/+-]+", re.UNICODE)
_MAX_NAME = 200
_MAX_DEPTH = 64


@dataclass(frozen=True)
class ProjectInfo:
    """The detected project.

    Attributes:
        name: the project scope, or None for ``global``.
        rule: the rule that fired (``TIDELINE_PROJECT``, ``CLAUDE_PROJECT_DIR``,
            ``TERMINAL_CWD``, ``ZCODE_PROJECT_DIR``, ``git_root``, ``cwd``, ``explicit``
            or ``none``).
        source: the value the rule read (a name or a directory).
    """

    name: str | None
    rule: str
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _safe(name: str) -> str | None:
    # NFC before and after: the store keeps names NFC, and a detected name must be the
    # very scope the store files things under (a compatibility ideograph is one case).
    cleaned = _UNSAFE.sub("-", unicodedata.normalize("NFC", name).strip()).strip(" -.")
    cleaned = unicodedata.normalize("NFC", cleaned[:_MAX_NAME]).rstrip(" -.")
    if not cleaned or not (cleaned[0].isalnum() or cleaned[0] == "_"):
        return None
    return cleaned


def _git_root(start: Path) -> Path | None:
    """The nearest ancestor (or ``start`` itself) that holds a ``.git`` entry."""
    current = start
    for _ in range(_MAX_DEPTH):
        if (current / ".git").exists():
            return current
        if current.parent == current:
            return None
        current = current.parent
    return None


def project_name_for(directory: str | Path) -> str | None:
    """Name the project a directory belongs to: its git work tree's name, else its own.

    Returns None for the home directory, the filesystem root or an unusable name.
    """
    try:
        path = Path(directory).expanduser().resolve()
    except (OSError, RuntimeError):
        return None
    root = _git_root(path)
    chosen = root if root is not None else path
    if chosen == chosen.parent or chosen == Path.home().resolve():
        return None
    return _safe(chosen.name)


def _named(value: str, rule: str) -> ProjectInfo:
    if value.casefold() == GLOBAL:
        return ProjectInfo(None, rule, value)
    return ProjectInfo(_safe(value), rule, value)


def _from_directory(here: Path) -> ProjectInfo:
    """The ``git_root``, ``cwd`` and ``none`` rules for one resolved directory."""
    root = _git_root(here)
    home = Path.home().resolve()
    if root is not None and root != home and root != root.parent:
        name = _safe(root.name)
        if name:
            return ProjectInfo(name, "git_root", str(root))
    if here != here.parent and here != home:
        name = _safe(here.name)
        if name:
            return ProjectInfo(name, "cwd", str(here))
    return ProjectInfo(None, "none", str(here))


def detect_project(
    cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
    explicit: str | None = None,
) -> ProjectInfo:
    """Detect the current project (see the module docstring for the rules).

    Args:
        cwd: the working directory to start from (default: the process's).
        env: the environment to read (default: ``os.environ``).
        explicit: a name given by the caller (a ``--scope``/``project`` argument); wins.
            ``global`` means no project.

    Returns:
        The project and the rule that fired.
    """
    environ = os.environ if env is None else env
    if explicit:
        return _named(explicit, "explicit")
    named = (environ.get("TIDELINE_PROJECT") or "").strip()
    if named:
        return _named(named, "TIDELINE_PROJECT")
    for var in CLIENT_DIR_VARS:
        value = (environ.get(var) or "").strip()
        if value and Path(value).expanduser().is_dir():
            name = project_name_for(value)
            if name:
                return ProjectInfo(name, var, value)
    try:
        here = Path(cwd) if cwd is not None else Path.cwd()
        here = here.expanduser().resolve()
    except (OSError, RuntimeError):
        return ProjectInfo(None, "none", "")
    return _from_directory(here)


def project_for_directory(
    directory: str | Path | None, env: Mapping[str, str] | None = None,
) -> ProjectInfo:
    """The project of something written in ``directory`` (an imported transcript line).

    The same rules as :func:`detect_project`, except that the directory the line
    names stands for the client's directory: ``TIDELINE_PROJECT`` first, then
    the git work tree that holds ``directory``, then its own name. A line without
    a directory gets ``none`` (``global``).

    Args:
        directory: where the line was written (a transcript's ``cwd``), if known.
        env: the environment to read (default: ``os.environ``).

    Returns:
        The project and the rule that fired.
    """
    environ = os.environ if env is None else env
    named = (environ.get("TIDELINE_PROJECT") or "").strip()
    if named:
        return _named(named, "TIDELINE_PROJECT")
    if not directory:
        return ProjectInfo(None, "none", "")
    try:
        here = Path(directory).expanduser().resolve()
    except (OSError, RuntimeError):
        return ProjectInfo(None, "none", str(directory))
    return _from_directory(here)


def current_project(name: str | None, chosen: ProjectInfo | None) -> ProjectInfo:
    """The current project ``name`` and how it was chosen.

    ``chosen`` (the detection a memory was opened with) answers while it still names
    the project; a project set by name since is ``TIDELINE_PROJECT`` when that
    variable names it, else ``explicit``.
    """
    if chosen is not None and chosen.name == name:
        return chosen
    if name is None:
        return ProjectInfo(None, "none")
    env = (os.environ.get("TIDELINE_PROJECT") or "").strip()
    return ProjectInfo(name, "TIDELINE_PROJECT" if env and env == name else "explicit", name)
