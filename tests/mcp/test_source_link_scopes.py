"""Issue 28 §2.1: ``source_links`` never cross a project boundary.

On ``ed15f9c`` a write into project A that linked a turn of project B succeeded while
an absent id was refused: an existence oracle, and A then stored B's id. Another
project's turn is now refused exactly like an absent one — same error, same message —
through the API, the CLI and MCP.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import Backend
from tests.conftest import hashing
from tests.mcp.conftest import run_with, text_of

from mcp import Client
from tideline import Memory
from tideline.errors import InvalidInput

pytestmark = pytest.mark.backends

SCOPES = ("alpha", "bravo", "charlie", "global")


def _refusal(mem: Memory, scope: str, link: int) -> str | None:
    try:
        mem.write("probe of a source link", scope=scope, source_links=[link])
    except InvalidInput as exc:
        return str(exc).replace(str(link), "<id>")
    return None


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(owner=st.sampled_from(SCOPES), writer=st.sampled_from(SCOPES))
def test_a_link_to_another_projects_turn_is_refused_like_an_absent_one(
        tmp_path_factory: pytest.TempPathFactory, backend: Backend, owner: str,
        writer: str) -> None:
    mem = backend.open(tmp_path_factory.mktemp("links") / "s", embedder=hashing(),
                       project="global")
    try:
        res = mem.add_turns([{"session": "s", "role": "user", "text": f"turn of {owner}"}],
                            scope=owner)
        turn = res.batch_ids[0]
        absent = turn + 1000
        before = mem.introspect()["memories"]
        refused_absent = _refusal(mem, writer, absent)
        assert refused_absent == "source_links name unknown turn ids: [<id>]"
        refused = _refusal(mem, writer, turn)
        if owner in (writer, "global"):
            assert refused is None  # its own project's turn, or a global one
        else:
            assert refused == refused_absent  # indistinguishable from an absent id
            assert mem.introspect()["memories"] == before  # nothing written
    finally:
        mem.close()


def test_mcp_memorize_refuses_another_projects_turn_like_an_absent_one(
        atlas_mem: Memory) -> None:
    theirs = atlas_mem.add_turns([{"session": "s", "text": "orchard's turn"}],
                                 scope="orchard").batch_ids[0]

    async def body(client: Client) -> tuple[str, str]:
        other = await client.call_tool("memorize", {"text": "probe", "source_links": [theirs]})
        absent = await client.call_tool("memorize", {"text": "probe",
                                                     "source_links": [theirs + 999]})
        assert other.is_error and absent.is_error
        return text_of(other), text_of(absent)

    other, absent = run_with(atlas_mem, body)
    assert other.replace(str(theirs), "<id>") == absent.replace(str(theirs + 999), "<id>")
    assert other.startswith("invalid_input: source_links name unknown turn ids")


def test_cli_write_refuses_another_projects_turn_like_an_absent_one(tmp_path: Path) -> None:
    store = tmp_path / "s"
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"session": "s", "role": "user", "text": "bravo's turn",
                                "id": "b-1"}) + "\n", encoding="utf-8")
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store)],
                              capture_output=True, text=True, env=env, timeout=120)

    assert cli("turns", "import", str(chat), "--scope", "projB").returncode == 0
    other = cli("write", "probe", "--scope", "projA", "--link", "1", "--json")
    absent = cli("write", "probe", "--scope", "projA", "--link", "2", "--json")
    assert other.returncode == absent.returncode != 0
    assert other.stderr.replace("[1]", "[<id>]") == absent.stderr.replace("[2]", "[<id>]")
    assert "unknown turn ids" in other.stderr
    mine = cli("write", "probe", "--scope", "projB", "--link", "1", "--json")
    assert mine.returncode == 0, mine.stderr
