"""Installing the Hermes memory provider into a Hermes home, and removing it again.

Hermes (``hermes-agent`` 0.19) loads memory providers only from its bundled
``plugins/memory/<name>/`` and from ``$HERMES_HOME/plugins/<name>/`` directories whose
``__init__.py`` mentions ``MemoryProvider`` and exposes ``register(ctx)``; no entry
point is consulted. :func:`install_hermes` writes such a shim, which imports the
provider from :mod:`tideline.plugins.hermes`, and selects it with
``memory.provider: tideline``; :func:`uninstall_hermes` puts the previous provider (and,
when nothing else changed, the exact ``config.yaml``) back.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tideline.errors import InvalidInput

__all__ = ["PLUGIN_NAME", "install_hermes", "uninstall_hermes"]

#: The provider's name in Hermes, and its directory under ``$HERMES_HOME/plugins``.
PLUGIN_NAME = "tideline"
_SHIM_MARK = "tideline-hermes-shim"

_SHIM = '''"""Tideline memory provider for Hermes Agent ({mark}, by `tideline install hermes`).

Hermes loads this directory as a MemoryProvider plugin; the provider itself lives in
the installed `tideline` package (tideline.plugins.hermes.TidelineMemoryProvider).
"""

try:
    from tideline.plugins.hermes import TidelineMemoryProvider, register  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the interpreter Hermes runs in
    raise ImportError("the Tideline MemoryProvider needs `pip install tideline-memory` in the "
                      "Python environment that runs Hermes") from exc
'''
_YAML = '''name: tideline
version: {version}
description: "Tideline long-term memory: T0-T4 injection, raw texture, hybrid recall, sleep."
hooks:
  - on_session_end
  - on_pre_compress
'''


def _hermes_home(home: str | Path | None) -> Path:
    from tideline.ingest.hermes import hermes_home

    return Path(home).expanduser() if home is not None else hermes_home()


def _hermes_cli() -> str | None:
    import sys

    local = Path(sys.executable).parent / "hermes"
    return str(local) if local.is_file() else shutil.which("hermes")


def _hermes(home: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    """Run the ``hermes`` command on a Hermes home; None when it is not installed."""
    import os

    exe = _hermes_cli()
    if exe is None:
        return None
    env = dict(os.environ, HERMES_HOME=str(home))
    return subprocess.run([exe, *args], env=env, capture_output=True,  # noqa: S603
                          text=True, timeout=120, check=False)


def _provider(home: Path) -> str | None:
    """The selected ``memory.provider`` (None: none selected, or Hermes is not installed)."""
    proc = _hermes(home, "config", "get", "memory.provider")
    if proc is None or proc.returncode != 0:
        return None
    value = proc.stdout.strip().splitlines()[-1].strip() if proc.stdout.strip() else ""
    return value or None


def _set_provider(home: Path, value: str | None) -> str:
    args = ("config", "set", "memory.provider", value) if value else (
        "config", "unset", "memory.provider")
    proc = _hermes(home, *args)
    if proc is None:
        return f"select it yourself: HERMES_HOME={home} hermes {' '.join(args)}"
    if proc.returncode != 0:
        return f"`hermes {' '.join(args)}` failed: {(proc.stderr or proc.stdout).strip()[:300]}"
    if value:
        return f"memory.provider set to {value!r} in {home / 'config.yaml'}"
    return f"memory.provider unset in {home / 'config.yaml'}"


def _digest_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


_STATE = "install.json"
_CONFIG_BACKUP = "config.yaml.before"


def install_hermes(hermes_home: str | Path | None = None, *,
                   dry_run: bool = False) -> dict[str, Any]:
    """Write the provider shim into ``$HERMES_HOME/plugins/tideline`` and select it.

    Hermes (``hermes-agent`` 0.19) loads memory providers only from its bundled
    ``plugins/memory/<name>`` and from ``$HERMES_HOME/plugins/<name>/``
    (``plugins/memory/__init__.py: load_memory_provider``), so this is the way in. The
    previous ``memory.provider`` and the exact bytes of ``config.yaml`` are kept in the
    plugin directory for :func:`uninstall_hermes`; replacing another provider warns.

    Returns:
        ``{"plugin_dir", "written", "previous_provider", "warnings", "messages"}``.

    Raises:
        InvalidInput: the directory exists and was not written by Tideline.
    """
    from tideline import __version__

    home = _hermes_home(hermes_home)
    target = home / "plugins" / PLUGIN_NAME
    init = target / "__init__.py"
    if init.exists() and _SHIM_MARK not in init.read_text(encoding="utf-8", errors="replace"):
        raise InvalidInput(f"{target} exists and was not written by Tideline; not touching it")
    files = {init: _SHIM.format(mark=_SHIM_MARK),
             target / "plugin.yaml": _YAML.format(version=__version__)}
    written = [str(p) for p, text in files.items()
               if not p.exists() or p.read_text(encoding="utf-8") != text]
    state_file = target / _STATE
    state: dict[str, Any] = {}
    if state_file.exists():  # re-installing: what was there before the first install counts
        state = json.loads(state_file.read_text(encoding="utf-8"))
    current = _provider(home)
    previous = state.get("previous_provider") if state else (
        current if current != PLUGIN_NAME else None)
    warnings = []
    if current and current != PLUGIN_NAME:
        warnings.append(f"replacing the memory provider {current!r} with 'tideline' "
                        "(`tideline uninstall hermes` selects it again)")
    messages = [f"{'would write' if dry_run else 'wrote'} {p}" for p in written] or [
        f"{target}: already up to date"]
    if dry_run:
        messages.append("would set memory.provider to 'tideline'")
    else:
        config = home / "config.yaml"
        if not state:
            state = {"previous_provider": previous, "config_existed": config.exists(),
                     "plugins_dir_existed": target.parent.exists()}
        target.mkdir(parents=True, exist_ok=True)
        if not state_file.exists() and config.exists():
            (target / _CONFIG_BACKUP).write_bytes(config.read_bytes())
        for path, text in files.items():
            path.write_text(text, encoding="utf-8")
        if current != PLUGIN_NAME:
            messages.append(_set_provider(home, PLUGIN_NAME))
        else:
            messages.append(f"memory.provider is 'tideline' in {config}")
        state["config_after"] = _digest_file(config)
        state_file.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    return {"plugin_dir": str(target), "written": written, "dry_run": dry_run,
            "previous_provider": previous, "warnings": warnings, "messages": messages}


def uninstall_hermes(hermes_home: str | Path | None = None, *,
                     dry_run: bool = False) -> dict[str, Any]:
    """Remove the shim written by :func:`install_hermes` and select the previous provider.

    When ``config.yaml`` is as the install left it, its pre-install bytes are put back
    (or it is deleted, when the install created it); otherwise only ``memory.provider``
    goes back to the previous one, and the pre-install copy is kept beside it as
    ``config.yaml.tideline-backup``.

    Raises:
        InvalidInput: the directory was not written by Tideline.
    """
    home = _hermes_home(hermes_home)
    target = home / "plugins" / PLUGIN_NAME
    init = target / "__init__.py"
    if not target.exists():
        return {"plugin_dir": str(target), "removed": False, "dry_run": dry_run,
                "restored_provider": None, "messages": [f"{target}: nothing to remove"]}
    if not init.exists() or _SHIM_MARK not in init.read_text(encoding="utf-8",
                                                              errors="replace"):
        raise InvalidInput(f"{target} was not written by Tideline; not removing it")
    state_file = target / _STATE
    state = json.loads(state_file.read_text(encoding="utf-8")) if state_file.exists() else {}
    previous = state.get("previous_provider")
    messages = [f"{'would remove' if dry_run else 'removed'} {target}"]
    if dry_run:
        messages.append(f"would select memory.provider {previous!r}" if previous
                        else "would unset memory.provider")
        return {"plugin_dir": str(target), "removed": False, "dry_run": True,
                "restored_provider": previous, "messages": messages}
    config = home / "config.yaml"
    backup = target / _CONFIG_BACKUP
    if state and _digest_file(config) == state.get("config_after"):
        # Nothing else changed since install: put the exact pre-install file back.
        if state.get("config_existed") and backup.exists():
            tmp = config.with_name(f".{config.name}.tideline-tmp")
            tmp.write_bytes(backup.read_bytes())
            tmp.replace(config)
            messages.append(f"restored {config} as it was before install")
        elif not state.get("config_existed"):
            config.unlink(missing_ok=True)
            messages.append(f"deleted {config} (created by the install)")
    elif _provider(home) == PLUGIN_NAME:
        messages.append(_set_provider(home, previous))
        if backup.exists():
            kept = config.with_name(config.name + ".tideline-backup")
            shutil.copy2(backup, kept)
            messages.append(f"{config} changed since install; its pre-install copy: {kept}")
    shutil.rmtree(target)
    if state and not state.get("plugins_dir_existed"):
        try:
            target.parent.rmdir()
        except OSError:
            pass  # something else lives there now
    if previous:
        messages.append(f"memory provider {previous!r} is selected again")
    return {"plugin_dir": str(target), "removed": True, "dry_run": False,
            "restored_provider": previous, "messages": messages}
