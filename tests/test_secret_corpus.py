"""Issue 33 item 4: a held-out-style corpus of 80+ credential kinds, caught on every write path.

On main ``ed15f9c`` 53 of these 86 kinds were stored in clear. The target is 95 % on each
path: the redactor itself, ``remember``, ``add_turns``, ``tideline import jsonl`` and MCP
``memorize``; every byte of the store (database and WAL) is searched afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import hashing
from tests.secret_corpus import Kind, corpus

from mcp import Client
from tideline import Memory
from tideline.mcp.server import build_server
from tideline.secrets import SECRET_LABELS, find_secrets, redact_secrets, rule_count

KINDS = corpus()
TARGET = 0.95


def _caught(kinds: list[Kind], stored: str | bytes) -> list[str]:
    """Kinds whose needle does not appear in ``stored`` (plain or JSON-escaped)."""
    out = []
    for k in kinds:
        needle = k.needle.encode() if isinstance(stored, bytes) else k.needle
        escaped = json.dumps(k.needle)[1:-1]
        alt = escaped.encode() if isinstance(stored, bytes) else escaped
        if needle not in stored and alt not in stored:
            out.append(k.name)
    return out


def test_the_corpus_has_at_least_70_kinds_and_the_rules_come_from_the_data_file() -> None:
    assert len({k.name for k in KINDS}) >= 70
    assert rule_count() > 100  # the hand-written rules and secret_rules.json's
    assert {"groq-key", "vault-token", "okta-token", "session-cookie"} <= set(SECRET_LABELS)


@pytest.mark.parametrize("seed", [33, 7, 101])
def test_the_redactor_catches_every_kind_of_the_corpus(seed: int) -> None:
    """The target is 95 % on a corpus the team does not see; on this one, every kind (a
    rule that stops firing shows here, not hidden under the 5 %)."""
    kinds = corpus(seed)
    missed = [k.name for k in kinds if k.needle in redact_secrets(k.text)[0]]
    assert missed == []


def _store_bytes(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file())


def test_every_write_path_catches_95_percent(tmp_path: Path) -> None:
    """remember, add_turns, ``tideline import jsonl`` and MCP memorize, each with the
    whole corpus; the needles are then looked for in every file of each store."""
    rates: dict[str, float] = {}

    # remember
    store = tmp_path / "remember"
    mem = Memory.open(store, embedder=hashing(), project="global")
    try:
        for n, k in enumerate(KINDS):
            mem.remember(f"note {n}: {k.text}")
        rates["remember"] = len(_caught(KINDS, _store_bytes(store))) / len(KINDS)
    finally:
        mem.close()

    # add_turns
    store = tmp_path / "turns"
    mem = Memory.open(store, embedder=hashing(), project="global")
    try:
        mem.add_turns([{"session": "s1", "role": "user", "text": k.text, "id": f"t{n}"}
                       for n, k in enumerate(KINDS)])
        rates["add_turns"] = len(_caught(KINDS, _store_bytes(store))) / len(KINDS)
    finally:
        mem.close()

    # tideline import jsonl (the CLI, a real process)
    store = tmp_path / "import"
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps({"session": "s2", "role": "user", "text": k.text,
                                        "id": f"j{n}"}) + "\n"
                            for n, k in enumerate(KINDS)), encoding="utf-8")
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    proc = subprocess.run([sys.executable, "-m", "tideline", "import", "jsonl", str(chat),
                           "--store", str(store), "--scope", "global"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rates["import jsonl"] = len(_caught(KINDS, _store_bytes(store))) / len(KINDS)

    # MCP memorize through the SDK client
    store = tmp_path / "mcp"
    mem = Memory.open(store, embedder=hashing(), project="global")
    try:
        async def main() -> None:
            async with Client(build_server(mem)) as client:
                for n, k in enumerate(KINDS):
                    # Prefixed: a text that is valid JSON is item 10's concern, not this one's.
                    result = await client.call_tool("memorize", {"text": f"note {n}: {k.text}"})
                    assert not result.is_error, result.content

        anyio.run(main)
        rates["memorize"] = len(_caught(KINDS, _store_bytes(store))) / len(KINDS)
    finally:
        mem.close()

    assert all(rate >= TARGET for rate in rates.values()), rates


# Prose that uses the words the new rules look for, and no credential.
CLEAN = [
    "The session ended after the login page timed out; the machine rebooted twice.",
    "Use mysql -h db -u app -p and type the password when asked.",
    "The user was identified by the badge reader, not by a password.",
    "Set the session cookie to SameSite=Lax; the sessionid is rotated on login.",
    "Heroku runs the worker; the build id 3f786850-e387-550f-dab8-36ed7e6dc881 failed.",
    "transaction 0x5e1f0b4a2c3d4e5f60718293a4b5c6d7e8f90123456789abcdef0123456789ab landed",
    "the flag --token-file points at the token; run with --api-key-file ~/.key",
    "pass the --password-stdin flag, then --secret-name prod-db",
    "CREATE USER reporting IDENTIFIED WITH auth_socket;",
    "the kubeconfig holds client-key-data for the admin user (rotated monthly)",
    "pat on the back; patterns.example for the patcher; key-value store; key-rotation job",
    "SSWS is Okta's scheme for API tokens; ask ops for one.",
    "see https://docs.example.com/setup and ssh git@github.com:org/repo.git",
    "AAAAA is a rating; the replicas r8 and r9 lag; gsk and xai are vendors",
    "the dp.pt prefix marks Doppler personal tokens; hvs. marks Vault service tokens",
    "session=interactive-mode and sid=none in the sample config",
]


@pytest.mark.parametrize("text", CLEAN)
def test_clean_prose_with_the_rules_words_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])


_WORDS = st.sampled_from(
    "session machine password mysql identified by heroku wallet private key "
    "token secret api pat cookie sid SSWS the a of to and deploy build release atlas "
    "Mira Ines 2026-11-20 v1.2.3 #42 --dry-run --verbose -p 5432 3f786850".split())


@settings(max_examples=300, deadline=None)
@given(st.lists(_WORDS, max_size=30).map(" ".join))
def test_sentences_of_rule_words_without_a_credential_are_left_alone(text: str) -> None:
    found = find_secrets(text)
    assert found == [], (text, found)
