"""Secret redaction: every format, the right vendor label, no false alarms on plain text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.secret_corpus import corpus

from tideline.bench.secrets import _PROSE, FakeSecret, fake_secrets
from tideline.secrets import (
    _RUN,
    SECRET_LABELS,
    _data_rules,
    _scan,
    find_secrets,
    redact_json,
    redact_secrets,
)

CORPUS = fake_secrets()


def test_corpus_covers_every_label_and_the_formats_the_issue_names() -> None:
    labels = {s.label for s in CORPUS}
    assert len(CORPUS) >= 40
    # The hand-written rules' labels; secret_rules.json's are covered by tests/secret_corpus.py.
    assert labels <= set(SECRET_LABELS)
    data = {r.label for r in _data_rules()}
    assert set(SECRET_LABELS) - labels <= data
    assert len(data & {label for k in corpus() for _, _, label in find_secrets(k.text)}) >= 40


_VENDOR_RULES = [r for r in _data_rules() if r.run and not r.context]


@pytest.mark.parametrize("rule", _VENDOR_RULES, ids=lambda r: r.label)
def test_each_vendor_rule_of_the_data_file_finds_its_own_shape(rule: Any) -> None:
    """Every token rule of secret_rules.json finds a string drawn from its own pattern,
    standing alone in a sentence (a rule that can never fire would pass unnoticed)."""

    @settings(max_examples=15, deadline=None, database=None)
    @given(st.from_regex(rule.regex, fullmatch=True))
    def check(token: str) -> None:
        if not _RUN.fullmatch(token):
            return  # a drawn character the real tokens never hold (e.g. a newline)
        out, labels = redact_secrets(f"the key is {token} ok")
        assert token not in out, (rule.label, token)

    check()


@pytest.mark.parametrize("secret", CORPUS, ids=lambda s: s.label)
def test_each_fake_secret_is_redacted_with_its_vendor(secret: FakeSecret) -> None:
    out, labels = redact_secrets(secret.text)
    for needle in secret.needles:
        assert needle not in out
    assert secret.label in labels
    assert f"[REDACTED:{secret.label}]" in out


def test_issue_9_item_9_reproducers() -> None:
    """Issue 9, item 9: an AWS secret access key, a PGP private key block,
    ``postgres://admin:pw@host``, Stripe ``sk_live_…``, ``"api_key": "…"`` in JSON,
    ``GITHUB_TOKEN=…`` / ``DB_PASSWORD=…`` (the ``_`` defeated the pattern), passwords
    under 8 characters, ``npm_…``, ``glpat-…``, ``"password": "…"`` reached the
    database in plain text, and ``sk-ant-…`` was labelled ``openai-key``."""
    cases = {
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY": "aws-secret-key",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0aB3wBCADx\n"
        "-----END PGP PRIVATE KEY BLOCK-----": "pgp-private-key",
        "postgres://admin:pw@host": "url-password",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc": "stripe-key",
        '{"api_key": "a1b2c3d4"}': "api-key",
        "GITHUB_TOKEN=abc123def456": "token",
        "DB_PASSWORD=hunter2": "password",
        "password: s3cr3t": "password",
        "npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8": "npm-token",
        "glpat-a1B2c3D4e5F6g7H8i9J0": "gitlab-token",
        '{"password": "pw1"}': "password",
        "sk-ant-api03-a1B2c3D4e5F6g7H8i9J0k1L2m3N4": "anthropic-key",
    }
    for text, label in cases.items():
        out, labels = redact_secrets(text)
        assert labels == [label], (text, labels)
        assert "openai-key" not in labels
    assert redact_secrets("DB_PASSWORD=hunter2")[0] == "DB_PASSWORD=[REDACTED:password]"
    assert redact_secrets("postgres://admin:pw@host")[0] == \
        "postgres://admin:[REDACTED:url-password]@host"


def test_only_the_secret_is_replaced_and_context_stays() -> None:
    out, _ = redact_secrets("export GITHUB_TOKEN=ghp_" + "a1B2" * 9 + " && make release")
    assert out == "export GITHUB_TOKEN=[REDACTED:github-token] && make release"
    assert redact_secrets("mysql://etl:Zc#4?w@10.0.0.7/etl")[0] == \
        "mysql://etl:[REDACTED:url-password]@10.0.0.7/etl"  # '#' and '?' unescaped
    yaml = "db:\n  user: app\n  password: sunshine\n  host: db.internal\n"
    assert redact_secrets(yaml)[0] == yaml.replace("sunshine", "[REDACTED:password]")


@pytest.mark.parametrize("text", [
    _PROSE,
    "the key point is speed; Key: the deploy happens on Tuesday",
    'sort_key = "name" and primary_key = id, monkey = abcdefgh12',
    "token bucket size of 64; Bearer tokens expire after 3600 seconds",
    "password reset flow is broken; the secret: keep it simple; pass: the ball",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed uuid "
    "123e4567-e89b-12d3-a456-426614174000",
    "see https://example.com/a:b@c and http://user@host/x, mail ana@example.com",
    "api_key: ${MAPS_KEY}; password: <your password>; token: null; auth: true",
    "use basic authentication for the dev server; backups_keep = 10",
    "边界 whale-listen psycopg2 E1234 ATL-5542 v1.2.3 2026-11-20T09:00:00Z",
])
def test_plain_text_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == (text, [])


_PIECES = st.sampled_from([s.text for s in CORPUS] + [
    " ", "\n", "=", ": ", '"', "'", "_", "key", "token", "password", "://", "@", "Bearer ",
    "AKIA", "sk-", "ghp_", "-----BEGIN ", "İ", "ß", "边界", "q~", "-us", ":AA", "sig=",
])
_TEXT = st.lists(st.one_of(_PIECES, st.text(max_size=30)), max_size=12).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_the_fast_gate_never_hides_a_secret(text: str) -> None:
    assert find_secrets(text) == (_scan(text, text.lower()) if len(text) >= 8 else [])


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_redaction_is_stable_and_total(text: str) -> None:
    out, labels = redact_secrets(text)
    assert redact_secrets(out)[0] == out  # a redaction marker is never found again
    assert set(labels) <= set(SECRET_LABELS)
    spans = find_secrets(text)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_journal_json_is_redacted_and_stays_json() -> None:
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
    raw = {"message": f"bad input {CORPUS[12].text}", "nested": [{"k": pem}], "n": 3,
           "path": __import__("pathlib").Path("/tmp/x")}
    text = redact_json(raw)
    data = json.loads(text)
    assert CORPUS[12].needles[0] not in text and "MIIEvQ" not in text
    assert data["n"] == 3 and data["path"] == "/tmp/x"
    assert "[REDACTED:private-key]" in data["nested"][0]["k"]
