"""The README's snippets run as written, and every CLI command is documented."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize("code", [c for lang, c in BLOCKS if lang == "bash"
                                  and not c.lstrip().startswith("make")])
def test_readme_shell(tmp_path: Path, code: str) -> None:
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path,
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
