"""Write (and remove) Tideline's MCP registration and hooks in Claude Code's settings.

=========  ==========================================  ================================
scope      hooks                                       MCP server
=========  ==========================================  ================================
user       ``~/.claude/settings.json``                 ``~/.claude.json`` → mcpServers
project    ``<project>/.claude/settings.json``         ``<project>/.mcp.json``
=========  ==========================================  ================================

(``$CLAUDE_CONFIG_DIR`` replaces ``~/.claude`` and holds ``.claude.json`` when set.)

Installing pins the store and namespace it was run with (``--store``/``$TIDELINE_HOME``,
``--namespace``/``$TIDELINE_NAMESPACE``) into every hook command and the MCP entry, so
Claude Code's own environment cannot send memory elsewhere. It is idempotent:
Tideline's entries are recognised by their command (``-m tideline.hooks <event>`` or
``tideline hook <event>``) and replaced, never duplicated; everything else in the files
is kept as it was. A file is only written when it changes, atomically.

Backups: the first install into an existing file copies it once, untouched, to
``<file>.tideline-backup`` (user scope) or to Tideline's state directory
(``$XDG_STATE_HOME/tideline/install-backups``, project scope: no backups in a
repository); re-installing keeps that copy. A file that did not exist gets no backup.

Uninstalling removes exactly Tideline's entries. When what is left equals the backup,
the backup's bytes are put back (byte-identical, every key that was there stays, e.g.
an empty ``"hooks": {}``) and the backup is deleted; when the file changed meanwhile,
only Tideline's entries go (empty containers that the backup did not have are dropped)
and the backup is kept. A file Tideline created is deleted when nothing else is left in
it. The warm prefetch server of the uninstalled hooks' store is stopped.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tideline.errors import InvalidInput, StoreError

__all__ = ["FileChange", "HOOK_EVENTS", "Pins", "backup_path", "claude_paths", "install_claude",
           "resolve_pins", "uninstall_claude"]

Scope = Literal["user", "project"]
SERVER_NAME = "tideline"
BACKUP_SUFFIX = ".tideline-backup"

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
    """One settings file: what it held, what it will hold, and what changed.

    ``after`` None means the file is deleted (or stays absent); ``restore`` holds the
    exact bytes written back on uninstall when they are the pre-install content.
    """

    path: Path
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changes: list[str] = field(default_factory=list)
    backup: Path | None = None
    restore: bytes | None = None
    take_backup: bool = False
    drop_backup: bool = False

    @property
    def changed(self) -> bool:
        """Whether writing is needed."""
        return self.before != self.after

    def diff(self) -> str:
        """A unified diff of the JSON text."""
        a = [] if self.before is None else _dump(self.before).splitlines(keepends=True)
        if self.restore is not None:
            b = self.restore.decode("utf-8", "replace").splitlines(keepends=True)
        else:
            b = [] if self.after is None else _dump(self.after).splitlines(keepends=True)
        return "".join(difflib.unified_diff(a, b, str(self.path), str(self.path)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        action = ("unchanged" if not self.changed else "deleted" if self.after is None
                  else "created" if self.before is None
                  else "restored" if self.restore is not None else "updated")
        return {"path": str(self.path), "changed": self.changed, "action": action,
                "changes": self.changes, "backup": str(self.backup) if self.backup else None}


@dataclass(frozen=True)
class Pins:
    """What the installed commands are pinned to."""

    store: Path | None
    namespace: str | None
    python: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"store": str(self.store) if self.store else None, "namespace": self.namespace,
                "python": self.python}


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


def backup_path(path: Path, scope: Scope) -> Path:
    """Where the one pre-install copy of a settings file lives.

    User scope: beside the file. Project scope: Tideline's state directory, so that no
    backup lands in a repository.
    """
    real = path.resolve()
    if scope == "user":
        return real.with_name(real.name + BACKUP_SUFFIX)
    base = (os.environ.get("XDG_STATE_HOME") or "").strip()
    root = Path(base).expanduser() if base else Path.home() / ".local" / "state"
    key = hashlib.sha256(str(real).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return root / "tideline" / "install-backups" / f"{key}-{real.name}"


def resolve_pins(store: Path | None = None, namespace: str | None = None, *,
                 python: str | None = None, portable: bool = False) -> Pins:
    """The store, namespace and interpreter an install writes into the commands.

    The store and namespace are the ones this process runs with (the arguments, else
    ``$TIDELINE_HOME``/``~/.tideline`` and ``$TIDELINE_NAMESPACE``/``default``). Portable
    settings (shared in a repository) pin only what was chosen explicitly.

    Raises:
        InvalidInput: the ``TIDELINE_*`` settings are invalid.
    """
    from tideline.config import Config

    overrides: dict[str, Any] = {}
    if store is not None:
        overrides["home"] = Path(store).expanduser().resolve()
    if namespace:
        overrides["namespace"] = namespace
    config = Config.load(**overrides)
    if portable:
        explicit_home = store is not None or bool((os.environ.get("TIDELINE_HOME") or "").strip())
        explicit_ns = bool(namespace) or bool((os.environ.get("TIDELINE_NAMESPACE") or "").strip())
        return Pins(config.home.resolve() if explicit_home else None,
                    config.namespace if explicit_ns else None, None)
    return Pins(config.home.expanduser().resolve(), config.namespace, python or sys.executable)


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


def _parse(path: Path, text: str) -> dict[str, Any]:
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


def _load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        if path.is_symlink():
            raise InvalidInput(f"{path} is a dangling symlink; not touching it")
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc}") from exc
    return _parse(path, text)


def _pre_install(path: Path, scope: Scope) -> tuple[Path, bytes, dict[str, Any]] | None:
    """The backup of a file (its path, exact bytes and JSON), if one is kept."""
    if not path.exists():
        return None
    backup = backup_path(path, scope)
    try:
        raw = backup.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {backup}: {exc}") from exc
    try:
        return backup, raw, _parse(backup, raw.decode("utf-8"))
    except (InvalidInput, UnicodeDecodeError):
        return None  # not a copy we can compare with: treat the file as without backup


def _strip_ours(settings: dict[str, Any], changes: list[str]) -> None:
    """Remove Tideline's hooks, leaving the containers (pruned later, if at all)."""
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
            else:
                kept_groups.append(group)
        hooks[event] = kept_groups


def _prune_hooks(settings: dict[str, Any], keep: dict[str, Any] | None) -> None:
    """Drop the hook containers left empty that the pre-install content did not have."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    had = (keep or {}).get("hooks")
    had_events = had if isinstance(had, dict) else {}
    for event in list(hooks):
        if hooks[event] == [] and event not in had_events:
            del hooks[event]
    if not hooks and "hooks" not in (keep or {}):
        del settings["hooks"]


def _finish(change: FileChange, scope: Scope, *, install: bool, had_ours: bool,
            pre: tuple[Path, bytes, dict[str, Any]] | None) -> FileChange:
    """Decide backup, exact restore or deletion for one planned file."""
    if install:
        # A fresh install cycle (nothing of ours in the file yet) takes the one backup.
        change.take_backup = change.before is not None and not had_ours and change.changed
        if change.take_backup:
            change.backup = backup_path(change.path, scope)
        elif pre is not None:
            change.backup = pre[0]
        return change
    if not had_ours:
        return FileChange(change.path, change.before, change.before, [])
    if pre is not None:
        backup, raw, data = pre
        change.backup = backup
        if change.after == data:
            change.restore, change.drop_backup = raw, True
            change.changes.append(f"restored the pre-install content from {backup}")
        else:
            change.changes.append(f"the file changed since install; kept {backup}")
    elif change.after == {}:
        change.after = None
        change.changes.append("deleted the file Tideline had created")
    return change


def _plan_hooks(path: Path, scope: Scope, *, install: bool, pins: Pins,
                portable: bool = False) -> FileChange:
    before = _load(path)
    pre = _pre_install(path, scope)
    after = copy.deepcopy(before) if before is not None else {}
    changes: list[str] = []
    _strip_ours(after, changes)
    had_ours = bool(changes)
    if install:
        changes.clear()
        hooks = after.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise InvalidInput(f"{path}: 'hooks' is not an object")
        for event, (cmd, timeout, background) in HOOK_EVENTS.items():
            entry: dict[str, Any] = {"type": "command",
                                     "command": hook_command(cmd, store=pins.store,
                                                             namespace=pins.namespace,
                                                             python=pins.python,
                                                             portable=portable),
                                     "timeout": timeout}
            if background:
                entry["async"] = True
            groups = hooks.setdefault(event, [])
            if not isinstance(groups, list):
                raise InvalidInput(f"{path}: hooks.{event} is not a list")
            groups.append({"hooks": [entry]})
            changes.append(f"hook {event} → {cmd}")
    else:
        # Without a backup, every container that held only Tideline's entries goes.
        _prune_hooks(after, pre[2] if pre else None)
    if before is None and not after:
        return FileChange(path, None, None, [])
    return _finish(FileChange(path, before, after, changes), scope, install=install,
                   had_ours=had_ours, pre=pre)


def _plan_mcp(path: Path, scope: Scope, *, install: bool, pins: Pins,
              portable: bool = False) -> FileChange:
    before = _load(path)
    pre = _pre_install(path, scope)
    after = copy.deepcopy(before) if before is not None else {}
    changes: list[str] = []
    servers = after.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInput(f"{path}: 'mcpServers' is not an object")
    had_ours = isinstance(servers, dict) and _is_ours_server(servers.get(SERVER_NAME))
    if install:
        servers = after.setdefault("mcpServers", {})
        servers[SERVER_NAME] = mcp_entry(store=pins.store, namespace=pins.namespace,
                                         python=pins.python, portable=portable)
        changes.append(f"MCP server {SERVER_NAME!r} (stdio: tideline serve)")
    elif had_ours and isinstance(servers, dict):
        del servers[SERVER_NAME]
        changes.append(f"removed MCP server {SERVER_NAME!r}")
        kept = pre[2] if pre else {}
        if not servers and "mcpServers" not in kept:
            del after["mcpServers"]
    if before is None and not after:
        return FileChange(path, None, None, [])
    return _finish(FileChange(path, before, after, changes), scope, install=install,
                   had_ours=had_ours, pre=pre)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tideline-tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _write(change: FileChange, scope: Scope) -> None:
    if not change.changed:
        return
    path = change.path
    try:
        real = path.resolve() if path.exists() else path
        if change.after is None:
            real.unlink()
            if scope == "project" and real.parent.name == ".claude":
                try:  # the .claude/ directory too, when Tideline's file was all it held
                    real.parent.rmdir()
                except OSError:
                    pass
            return
        if change.take_backup and change.backup is not None:
            change.backup.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            shutil.copy2(real, change.backup)
        mode = (real.stat().st_mode & 0o777 if real.exists()
                else 0o600 if path.name == ".claude.json" else 0o644)
        real.parent.mkdir(parents=True, exist_ok=True)
        data = change.restore if change.restore is not None else _dump(change.after).encode()
        _atomic_write(real, data, mode)
        if change.drop_backup and change.backup is not None:
            change.backup.unlink(missing_ok=True)
            change.backup = None
    except OSError as exc:
        raise StoreError(f"cannot write {change.path}: {exc}") from exc


def installed_stores(scope: Scope, project_dir: Path | None = None) -> list[tuple[Path, str]]:
    """The (store, namespace) pairs the installed hook commands point at.

    An unpinned command uses ``$TIDELINE_HOME``/``$TIDELINE_NAMESPACE`` of this process.

    Raises:
        InvalidInput: the settings file is not valid JSON.
    """
    from tideline.config import Config

    settings = _load(claude_paths(scope, project_dir)[0]) or {}
    found: list[tuple[Path, str]] = []
    hooks = settings.get("hooks")
    for groups in (hooks.values() if isinstance(hooks, dict) else []):
        for group in groups if isinstance(groups, list) else []:
            inner = group.get("hooks") if isinstance(group, dict) else None
            for h in inner if isinstance(inner, list) else []:
                cmd = str(h.get("command", "")) if isinstance(h, dict) else ""
                if not _OURS.search(cmd):
                    continue
                try:
                    words = shlex.split(cmd)
                except ValueError:
                    continue
                opts = {w: words[i + 1] for i, w in enumerate(words[:-1])
                        if w.startswith("--")}
                overrides: dict[str, Any] = {}
                if "--store" in opts:
                    overrides["home"] = opts["--store"]
                if "--namespace" in opts:
                    overrides["namespace"] = opts["--namespace"]
                config = Config.load(**overrides)
                pair = (config.home, config.namespace)
                if pair not in found:
                    found.append(pair)
    return found


def _run(install: bool, scope: Scope, *, project_dir: Path | None, pins: Pins,
         dry_run: bool, portable: bool = False) -> list[FileChange]:
    settings_path, mcp_path = claude_paths(scope, project_dir)
    plans = [
        _plan_hooks(settings_path, scope, install=install, pins=pins, portable=portable),
        _plan_mcp(mcp_path, scope, install=install, pins=pins, portable=portable),
    ]
    if not dry_run:
        for plan in plans:
            _write(plan, scope)
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
        store: the store directory to pin (default: the one this process uses,
            ``$TIDELINE_HOME`` or ``~/.tideline``).
        namespace: the namespace to pin (default: ``$TIDELINE_NAMESPACE`` or ``default``).
        dry_run: compute the changes without writing.
        python: the interpreter to run (default: this one).
        portable: write ``tideline hook <event>`` / ``tideline serve`` looked up on ``PATH``
            instead of absolute paths (for project settings shared in a repository); only an
            explicitly chosen store or namespace is pinned then.

    Returns:
        One :class:`FileChange` per settings file (with ``backup`` when one is kept).

    Raises:
        InvalidInput: a settings file is not valid JSON (nothing is written), or the
            ``TIDELINE_*`` settings are invalid.
        StoreError: a file cannot be written.
    """
    pins = resolve_pins(store, namespace, python=python, portable=portable)
    return _run(True, scope, project_dir=project_dir, pins=pins, dry_run=dry_run,
                portable=portable)


def uninstall_claude(scope: Scope = "user", *, project_dir: Path | None = None,
                     dry_run: bool = False) -> list[FileChange]:
    """Remove exactly Tideline's hooks and MCP registration from Claude Code's settings.

    Each file gets its pre-install content back (see the module docstring); the warm
    server is stopped by the CLI (:func:`installed_stores` names it).

    Raises:
        InvalidInput: a settings file is not valid JSON (nothing is written).
        StoreError: a file cannot be written.
    """
    return _run(False, scope, project_dir=project_dir, pins=Pins(None, None, None),
                dry_run=dry_run)
