"""The README's snippets run as written, and every CLI command is documented."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text("utf-8")
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.S)


def _env(tmp: Path) -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), HOME=str(tmp))
    env.pop("TIDELINE_HOME", None)
    env.pop("TIDELINE_EMBEDDER", None)
    return env


@pytest.mark.parametrize("code", [c for lang, c in BLOCKS if lang == "python"])
def test_readme_python(tmp_path: Path, code: str) -> None:
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "PostgreSQL" in proc.stdout


def _error_codes() -> set[str]:
    from tideline.mcp.errors import JSONRPC_CODES

    return set(JSONRPC_CODES)


def checked(code: str) -> str:
    """The snippet with what its comments claim turned into checks.

    A command whose comment names an error code (``# another project's id: not_found``)
    must fail with that code: the line becomes "run it, expect a failure whose stderr
    names the code". Every other line must succeed (``bash -e``).
    """
    codes = _error_codes()
    out: list[str] = []
    for line in code.splitlines():
        command, _, comment = line.partition("  # ")
        claimed = [c for c in re.findall(r"\b[a-z_]+\b", comment) if c in codes]
        if claimed and command.strip() and not command.rstrip().endswith("\\"):
            want = claimed[-1]
            out.append(f"if {command.strip()} 2>claim.err; then echo 'README claims "
                       f"{want}, but it succeeded: {command.strip()}' >&2; exit 1; fi; "
                       f"grep -q ': {want}: ' claim.err || {{ cat claim.err >&2; "
                       f"echo 'README claims {want}: {command.strip()}' >&2; exit 1; }}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def test_a_claimed_error_is_checked(tmp_path: Path) -> None:
    """The check itself: a claim the command does not bear out fails the snippet."""
    env = dict(os.environ)
    wrong = checked("true                 # would be not_found\n")
    right = checked("sh -c 'echo \"tideline: error: not_found: no memory\" >&2; exit 4'"
                    "  # not_found\n")
    assert subprocess.run(["bash", "-euo", "pipefail", "-c", wrong], env=env,
                          capture_output=True, cwd=tmp_path).returncode != 0
    assert subprocess.run(["bash", "-euo", "pipefail", "-c", right], env=env,
                          capture_output=True, cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("code", [c for lang, c in BLOCKS if lang == "bash"
                                  and not c.lstrip().startswith("make")])
def test_readme_shell(tmp_path: Path, code: str) -> None:
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", checked(code)], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("code", [c for lang, c in BLOCKS if lang == "json"])
def test_readme_json_is_valid(code: str) -> None:
    json.loads(code)


def test_every_cli_command_is_documented() -> None:
    from typer.main import get_command

    from tideline.cli import agent, app, archive, commands, dream, sleep  # noqa: F401

    docs = README + "".join(p.read_text("utf-8") for p in (ROOT / "docs").glob("*.md"))
    group = get_command(app)
    names = list(group.commands)  # type: ignore[attr-defined]
    missing = [n for n in names if f"tideline {n}" not in docs]
    assert not missing, f"undocumented commands: {missing}"


def _commands() -> dict[str, Any]:
    """Every command and sub-command by its full name (``import jsonl``)."""
    from typer.main import get_command

    from tideline.cli import agent, app, commands, dream, sleep  # noqa: F401

    out: dict[str, Any] = {}
    for name, cmd in get_command(app).commands.items():  # type: ignore[attr-defined]
        out[name] = cmd
        for sub, subcmd in getattr(cmd, "commands", {}).items():
            out[f"{name} {sub}"] = subcmd
    return out


def _option_help(command: str, option: str) -> str:
    params = {p.name: p for p in _commands()[command].params}
    return str(params[option].help)


def test_every_sub_command_is_documented() -> None:
    docs = README + "".join(p.read_text("utf-8") for p in (ROOT / "docs").glob("*.md"))
    missing = [n for n in _commands() if f"tideline {n}" not in docs]
    assert not missing, f"undocumented commands: {missing}"


@pytest.mark.parametrize(("command", "default"), [
    ("import claude", "each transcript line's cwd"),
    ("import hermes", "each session's git root or cwd"),
    ("import jsonl", "as for `tideline remember`"),
])
def test_each_importers_scope_help_states_its_own_default(command: str, default: str) -> None:
    """Issue 10, item 12: `import claude --scope` said "default: global for writes", but
    the Claude importer files each turn under the project its cwd names."""
    text = _option_help(command, "scope")
    assert f"default: {default}" in text.replace("the project named by ", ""), text
    assert "global for writes" not in text


def test_one_jsonl_import_the_other_name_a_documented_alias() -> None:
    """Issue 10, item 12: `turns import` and `import jsonl` were two implementations."""
    cmds = _commands()
    alias, canonical = cmds["turns import"], cmds["import jsonl"]
    assert inspect.unwrap(alias.callback) is inspect.unwrap(canonical.callback)
    assert [p.name for p in alias.params] == [p.name for p in canonical.params]
    assert str(alias.help).startswith("Alias of `tideline import jsonl`.")
    assert str(alias.help).endswith(str(canonical.help))
    cli_md = (ROOT / "docs" / "cli.md").read_text("utf-8")
    assert "`tideline turns import` is an alias of `tideline import jsonl`" in cli_md
