"""Write (and remove) Tideline's MCP registration and hooks in Claude Code's settings.

=========  ==========================================  ================================
scope      hooks                                       MCP server
=========  ==========================================  ================================
user       ``~/.claude/settings.json``                 ``~/.claude.json`` → mcpServers
project    ``<project>/.claude/settings.json``         ``<project>/.mcp.json``
=========  ==========================================  ================================

(``$CLAUDE_CONFIG_DIR`` replaces ``~/.claude`` and holds ``.claude.json`` when set.)

Installing is idempotent: Tideline's entries are recognised by their command
(``-m tideline.hooks <event>`` or ``tideline hook <event>``) and replaced, never
duplicated; everything else in the files is kept as it was. A file is only
written when it changes, atomically, after a backup copy
(``<file>.tideline-backup-<time>``). Uninstalling removes exactly those entries
(and the groups or keys they leave empty).
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tideline.errors import InvalidInput, StoreError

__all__ = ["FileChange", "HOOK_EVENTS", "claude_paths", "install_claude", "uninstall_claude"]

Scope = Literal["user", "project"]
SERVER_NAME = "tideline"

#: Claude Code event → (hook command, timeout in seconds, run asynchronously?)
HOOK_EVENTS: dict[str, tuple[str, int, bool]] = {
    "SessionStart": ("session-start", 30, False),
    "UserPromptSubmit": ("prompt", 30, False),
    # Recording turns may embed them and sleep may run: never make the user wait for it.
    "Stop": ("stop", 300, True),
    "PreCompact": ("pre-compact", 300, True),
    "SessionEnd": ("session-end", 300, False),
}
_OURS = re.compile(r"(?:-m\s+tideline\.hooks|\btideline(?:\.exe)?['\"]?\s+hook)\s+"
                   r"(?:session-start|prompt|stop|pre-compact|session-end)\b")


@dataclass
class FileChange:
    """One settings file: what it held, what it will hold, and what changed."""

    path: Path
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changes: list[str] = field(default_factory=list)
    backup: Path | None = None

    @property
    def changed(self) -> bool:
        """Whether writing is needed."""
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff of the JSON text."""
        a = [] if self.before is None else _dump(self.before).splitlines(keepends=True)
        b = [] if self.after is None else _dump(self.after).splitlines(keepends=True)
        return "".join(difflib.unified_diff(a, b, str(self.path), str(self.path)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {"path": str(self.path), "changed": self.changed, "changes": self.changes,
                "backup": str(self.backup) if self.backup else None}


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def claude_dir() -> Path:
    """Claude Code's config directory: ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``."""
    env = (os.environ.get("CLAUDE_CONFIG_DIR") or "").strip()
    return Path(env).expanduser() if env else Path.home() / ".claude"


def claude_paths(scope: Scope, project_dir: Path | None = None) -> tuple[Path, Path]:
    """The (hooks settings file, MCP registration file) of a scope.

    Raises:
        InvalidInput: unknown scope.
    """
    if scope == "user":
        env = (os.environ.get("CLAUDE_CONFIG_DIR") or "").strip()
        mcp = Path(env).expanduser() / ".claude.json" if env else Path.home() / ".claude.json"
        return claude_dir() / "settings.json", mcp
    if scope == "project":
        root = (project_dir or Path.cwd()).resolve()
        return root / ".claude" / "settings.json", root / ".mcp.json"
    raise InvalidInput(f"scope must be user or project, got {scope!r}")


def _command_prefix(python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m"]


def hook_command(event_cmd: str, *, store: Path | None = None, namespace: str | None = None,
                 python: str | None = None, portable: bool = False) -> str:
    """The shell command Claude Code runs for one hook.

    By default this interpreter's absolute path with the fast ``-m tideline.hooks`` entry;
    ``portable`` writes ``tideline hook <event>`` (found on ``PATH``; slower start).
    """
    parts = (["tideline", "hook", event_cmd] if portable
             else [*_command_prefix(python), "tideline.hooks", event_cmd])
    if store is not None:
        parts += ["--store", str(store)]
    if namespace:
        parts += ["--namespace", namespace]
    return " ".join(shlex.quote(p) for p in parts)


def mcp_entry(*, store: Path | None = None, namespace: str | None = None,
              python: str | None = None, portable: bool = False) -> dict[str, Any]:
    """The ``mcpServers.tideline`` entry: ``tideline serve`` over stdio."""
    exe = python or sys.executable
    script = Path(exe).parent / "tideline"
    if portable:
        command, args = "tideline", ["serve"]
    elif python is None and script.is_file() and os.access(script, os.X_OK):
        command, args = str(script), ["serve"]
    else:
        command, args = exe, ["-m", "tideline", "serve"]
    entry: dict[str, Any] = {"type": "stdio", "command": command, "args": args}
    env: dict[str, str] = {}
    if store is not None:
        env["TIDELINE_HOME"] = str(store)
    if namespace:
        env["TIDELINE_NAMESPACE"] = namespace
    if env:
        entry["env"] = env
    return entry


def _is_ours_server(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    words = [str(entry.get("command", "")), *map(str, entry.get("args") or [])]
    return any(Path(w).name in ("tideline", "tideline.exe") for w in words) or (
        "-m" in words and "tideline" in words)


def _load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    if path.is_symlink() and not path.resolve().is_file():
        raise InvalidInput(f"{path} is a dangling symlink; not touching it")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); "
                           "fix or move it, then run again") from exc
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} does not hold a JSON object")
    return data


def _strip_ours(settings: dict[str, Any], changes: list[str]) -> None:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            kept = [h for h in inner if not (isinstance(h, dict)
                                             and _OURS.search(str(h.get("command", ""))))]
            if len(kept) != len(inner):
                changes.append(f"removed Tideline hook from {event}")
            if kept:
                kept_groups.append({**group, "hooks": kept})
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if not hooks:
        del settings["hooks"]


def _plan_hooks(path: Path, *, install: bool, store: Path | None, namespace: str | None,
                python: str | None, portable: bool = False) -> FileChange:
    before = _load(path)
    after = copy.deepcopy(before) if before is not None else {}
    changes: list[str] = []
    _strip_ours(after, changes)
    if install:
        hooks = after.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise InvalidInput(f"{path}: 'hooks' is not an object")
        for event, (cmd, timeout, background) in HOOK_EVENTS.items():
            entry: dict[str, Any] = {"type": "command",
                                     "command": hook_command(cmd, store=store,
                                                             namespace=namespace, python=python,
                                                             portable=portable),
                                     "timeout": timeout}
            if background:
                entry["async"] = True
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise InvalidInput(f"{path}: hooks.{event} is not a list")
            groups.append({"hooks": [entry]})
            changes.append(f"hook {event} → {cmd}")
    if before is None and not after:
        return FileChange(path, None, None, [])
    return FileChange(path, before, after, changes)


def _plan_mcp(path: Path, *, install: bool, store: Path | None, namespace: str | None,
              python: str | None, portable: bool = False) -> FileChange:
    before = _load(path)
    after = copy.deepcopy(before) if before is not None else {}
    changes: list[str] = []
    servers = after.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInput(f"{path}: 'mcpServers' is not an object")
    if install:
        servers = after.setdefault("mcpServers", {})
        servers[SERVER_NAME] = mcp_entry(store=store, namespace=namespace, python=python,
                                         portable=portable)
        changes.append(f"MCP server {SERVER_NAME!r} (stdio: tideline serve)")
    elif isinstance(servers, dict) and _is_ours_server(servers.get(SERVER_NAME)):
        del servers[SERVER_NAME]
        changes.append(f"removed MCP server {SERVER_NAME!r}")
        if not servers:
            del after["mcpServers"]
    if before is None and not after:
        return FileChange(path, None, None, [])
    return FileChange(path, before, after, changes)


def _write(change: FileChange) -> None:
    if not change.changed or change.after is None:
        return
    path = change.path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = None
        if path.exists():
            real = path.resolve()
            mode = real.stat().st_mode & 0o777
            stamp = time.strftime("%Y%m%dT%H%M%S")
            backup = real.with_name(f"{real.name}.tideline-backup-{stamp}")
            n = 1
            while backup.exists():
                backup = real.with_name(f"{real.name}.tideline-backup-{stamp}-{n}")
                n += 1
            shutil.copy2(real, backup)
            change.backup = backup
            path = real
        tmp = path.with_name(f".{path.name}.tideline-tmp-{os.getpid()}")
        tmp.write_text(_dump(change.after), encoding="utf-8")
        os.chmod(tmp, mode if mode is not None else (0o600 if path.name == ".claude.json"
                                                     else 0o644))
        os.replace(tmp, path)
    except OSError as exc:
        raise StoreError(f"cannot write {change.path}: {exc}") from exc


def _run(install: bool, scope: Scope, *, project_dir: Path | None, store: Path | None,
         namespace: str | None, dry_run: bool, python: str | None,
         portable: bool = False) -> list[FileChange]:
    settings_path, mcp_path = claude_paths(scope, project_dir)
    plans = [
        _plan_hooks(settings_path, install=install, store=store, namespace=namespace,
                    python=python, portable=portable),
        _plan_mcp(mcp_path, install=install, store=store, namespace=namespace, python=python,
                  portable=portable),
    ]
    if not dry_run:
        for plan in plans:
            _write(plan)
    return plans


def install_claude(scope: Scope = "user", *, project_dir: Path | None = None,
                   store: Path | None = None, namespace: str | None = None,
                   dry_run: bool = False, python: str | None = None,
                   portable: bool = False) -> list[FileChange]:
    """Register ``tideline serve`` and the five hooks in Claude Code's settings.

    Args:
        scope: ``user`` (all projects) or ``project`` (the project's ``.claude/`` and
            ``.mcp.json``).
        project_dir: the project root for ``project`` scope (default: the current directory).
        store: a store directory to pin (default: ``$TIDELINE_HOME``/``~/.tideline`` at run time).
        namespace: a namespace to pin.
        dry_run: compute the changes without writing.
        python: the interpreter to run (default: this one).
        portable: write ``tideline hook <event>`` / ``tideline serve`` looked up on ``PATH``
            instead of absolute paths (for project settings shared in a repository).

    Returns:
        One :class:`FileChange` per settings file (with ``backup`` when one was written).

    Raises:
        InvalidInput: a settings file is not valid JSON (nothing is written).
        StoreError: a file cannot be written.
    """
    return _run(True, scope, project_dir=project_dir, store=store, namespace=namespace,
                dry_run=dry_run, python=python, portable=portable)


def uninstall_claude(scope: Scope = "user", *, project_dir: Path | None = None,
                     dry_run: bool = False) -> list[FileChange]:
    """Remove exactly Tideline's hooks and MCP registration from Claude Code's settings.

    Raises:
        InvalidInput: a settings file is not valid JSON (nothing is written).
        StoreError: a file cannot be written.
    """
    return _run(False, scope, project_dir=project_dir, store=None, namespace=None,
                dry_run=dry_run, python=None)
