"""Secret redaction: a corpus of fake credentials, and our rules against ``detect-secrets``.

``python -m tideline.bench secrets [--runs 7] [--seed 9]``

The corpus (:func:`fake_secrets`) holds one realistic-looking fake of every format
the redactor knows, each inside the kind of sentence, config line or JSON an agent
sees: the characters are drawn at random in the vendor's shape, so none is a real
credential (checksummed formats such as GitHub's fail their checksum).

The benchmark times both detectors on the same texts in the same run, median of
``--runs`` runs: µs per 1 KB of ordinary text with no secret (the common case on
the write path) and per 1 KB holding one secret, and counts how many corpus items
each one finds and labels. ``detect-secrets`` (Yelp, its default plugins) is only
needed here: ``pip install detect-secrets``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tideline.secrets import find_secrets

__all__ = ["FakeSecret", "fake_secrets", "main"]

_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits
_B64 = _ALNUM + "+/"
_URLSAFE = _ALNUM + "_-"
_HEX = "0123456789abcdef"


@dataclass(frozen=True)
class FakeSecret:
    """One fake credential in context.

    Attributes:
        label: the label the redactor must give it.
        text: the sentence, config line or JSON that carries it.
        needles: substrings that must not survive redaction (the secret, or a
            distinctive piece of it when the secret itself is short).
    """

    label: str
    text: str
    needles: tuple[str, ...]


def fake_secrets(seed: int = 9) -> list[FakeSecret]:
    """About fifty fake credentials, one of every format the redactor covers.

    Args:
        seed: makes the corpus reproducible.

    Returns:
        The corpus, each item with the label it must get.
    """
    rng = random.Random(seed)

    def r(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    def pw(n: int) -> str:
        return r(string.ascii_letters, 1) + r(_ALNUM + "!#%*+", n - 2) + r(string.digits, 1)

    pem_body = "\n".join(r(_B64, 64) for _ in range(6))
    pgp_body = "\n".join(r(_B64, 64) for _ in range(5))
    gcp_body = "\\n".join(r(_B64, 64) for _ in range(4))
    aws_id = "AKIA" + r(_UPPER, 16)
    aws_secret = r(_ALNUM, 18) + "/" + r(_ALNUM, 10) + "+" + r(_ALNUM, 10)
    aws_secret2 = r(_ALNUM, 20) + "/" + r(_ALNUM, 19)
    aws_secret3 = r(_ALNUM, 12) + "+" + r(_ALNUM, 27)
    ghp = "ghp_" + r(_ALNUM, 36)
    gho = "gho_" + r(_ALNUM, 36)
    pat = "github_pat_" + r(_ALNUM, 22) + "_" + r(_ALNUM, 59)
    glpat = "glpat-" + r(_URLSAFE, 20)
    npm = "npm_" + r(_ALNUM, 36)
    npm2 = "npm_" + r(_ALNUM, 36)
    pypi = "pypi-AgEIcHlwaS5vcmc" + r(_URLSAFE, 70)
    ant = "sk-ant-api03-" + r(_URLSAFE, 93) + "AA"
    ant2 = "sk-ant-api03-" + r(_URLSAFE, 93) + "AA"
    oai_proj = "sk-proj-" + r(_URLSAFE, 48) + "T3BlbkFJ" + r(_URLSAFE, 20)
    oai = "sk-" + r(_ALNUM, 20) + "T3BlbkFJ" + r(_ALNUM, 20)
    stripe = "sk_live_" + r(_ALNUM, 24)
    stripe2 = "sk_live_" + r(_ALNUM, 99)
    stripe_rk = "rk_test_" + r(_ALNUM, 24)
    whsec = "whsec_" + r(_ALNUM, 32)
    google = "AIza" + r(_URLSAFE, 35)
    gocspx = "GOCSPX-" + r(_URLSAFE, 28)
    azure_key = r(_B64, 86) + "=="
    azure_secret = r(_ALNUM, 3) + "8Q~" + r(_ALNUM + "_~.-", 34)
    sas = r(_ALNUM, 20) + "%2B" + r(_ALNUM, 20) + "%3D"
    slack = f"xoxb-{r(string.digits, 12)}-{r(string.digits, 13)}-{r(_ALNUM, 24)}"
    slack_hook = f"T{r(_UPPER, 10)}/B{r(_UPPER, 10)}/{r(_ALNUM, 24)}"
    jwt = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + r(_URLSAFE, 60) + "."
           + r(_URLSAFE, 43))
    bearer = r(_URLSAFE, 20) + r(string.digits, 4) + r(_URLSAFE, 16)
    hf = "hf_" + r(_ALNUM, 34)
    sendgrid = f"SG.{r(_URLSAFE, 22)}.{r(_URLSAFE, 43)}"
    telegram = f"{r(string.digits, 10)}:AA{r(_URLSAFE, 33)}"
    docker = "dckr_pat_" + r(_URLSAFE, 27)
    do_token = "dop_v1_" + r(_HEX, 64)
    twilio = "SK" + r(_HEX, 32)
    shopify = "shpat_" + r(_HEX, 32)
    mailchimp = r(_HEX, 32) + "-us14"
    gitlab_runner = "glrt-" + r(_URLSAFE, 20)
    discord = (f"M{r(_URLSAFE, 23)}.{r(_URLSAFE, 6)}."
               f"{r(_URLSAFE, 13)}{r(string.digits, 1)}{r(_URLSAFE, 13)}")
    ya29 = "ya29." + r(_URLSAFE, 120)
    putty = "\n".join(r(_B64, 64) for _ in range(3))
    pw_db, pw_short, pw_json, pw_yaml, pw_prose, pw_url = (pw(14), pw(6), pw(11), pw(10),
                                                            pw(9), pw(13))
    token_plain = r(_ALNUM, 20)
    api_json = r(_ALNUM, 32)
    api_yaml = r(_ALNUM, 28)
    signing = r(_HEX, 32)
    app_key = r(_ALNUM, 16) + r(string.digits, 4) + r(_ALNUM, 12)
    redis_pw = pw(12)
    basic = r(_B64, 28) + "=="
    client_secret = pw(24)
    private_key_hex = r(_HEX, 40)
    session_token = r(_B64, 160)
    return [
        FakeSecret("aws-access-key-id", f"the deploy user is {aws_id} in eu-west-1", (aws_id,)),
        FakeSecret("aws-secret-key", f"aws_secret_access_key = {aws_secret}", (aws_secret,)),
        FakeSecret("aws-secret-key",
                   f"my AWS secret access key is {aws_secret2} (rotate it)", (aws_secret2,)),
        FakeSecret("aws-secret-key", f"creds: {aws_id} {aws_secret3}", (aws_secret3,)),
        FakeSecret("aws-session-token", f"AWS_SESSION_TOKEN={session_token}",
                   (session_token[:40],)),
        FakeSecret("private-key",
                   f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----",
                   tuple(pem_body.split("\n")[:3])),
        FakeSecret("private-key",
                   f"key:\n-----BEGIN OPENSSH PRIVATE KEY-----\n{pgp_body[::-1]}\n"
                   "-----END OPENSSH PRIVATE KEY-----", (pgp_body[::-1].split("\n")[1],)),
        FakeSecret("pgp-private-key",
                   f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{pgp_body}\n=Ab3x\n"
                   "-----END PGP PRIVATE KEY BLOCK-----", tuple(pgp_body.split("\n")[:2])),
        FakeSecret("gcp-service-account-key",
                   f'{{"type": "service_account", "project_id": "atlas-prod", '
                   f'"private_key_id": "{private_key_hex}", '
                   f'"private_key": "-----BEGIN PRIVATE KEY-----\\n{gcp_body}\\n'
                   f'-----END PRIVATE KEY-----\\n", "client_email": '
                   f'"loader@atlas-prod.iam.gserviceaccount.com"}}',
                   (private_key_hex, gcp_body.split("\\n")[0])),
        FakeSecret("url-password", "connect with postgres://admin:pw@db.internal:5432/atlas",
                   ("admin:pw@",)),
        FakeSecret("url-password", f"DATABASE_URL=mysql://loader:{pw_url}@10.0.0.7/etl",
                   (pw_url,)),
        FakeSecret("url-password", f"cache at redis://:{redis_pw}@cache:6379/0", (redis_pw,)),
        FakeSecret("stripe-key", f"charge with {stripe} in prod", (stripe,)),
        FakeSecret("stripe-key", f"STRIPE_SECRET_KEY={stripe2}", (stripe2,)),
        FakeSecret("stripe-key", f"restricted key {stripe_rk}", (stripe_rk,)),
        FakeSecret("stripe-webhook-secret", f"webhook signing: {whsec}", (whsec,)),
        FakeSecret("api-key", f'{{"service": "geo", "api_key": "{api_json}"}}', (api_json,)),
        FakeSecret("api-key", f"maps:\n  api_key: {api_yaml}\n  region: eu", (api_yaml,)),
        FakeSecret("token", f"GITHUB_TOKEN={token_plain} make release", (token_plain,)),
        FakeSecret("github-token", f"export GITHUB_TOKEN={ghp}", (ghp,)),
        FakeSecret("github-token", f"oauth token {gho} from the app", (gho,)),
        FakeSecret("github-token", f"fine-grained: {pat}", (pat,)),
        FakeSecret("password", f"DB_PASSWORD={pw_db}", (pw_db,)),
        FakeSecret("password", f"login with password: {pw_short}", (pw_short,)),
        FakeSecret("password", f'{{"user": "etl", "password": "{pw_json}"}}', (pw_json,)),
        FakeSecret("password", f"db:\n  user: app\n  password: '{pw_yaml}'\n", (pw_yaml,)),
        FakeSecret("password", f"the wifi password is {pw_prose} btw", (pw_prose,)),
        FakeSecret("npm-token", f"publish with {npm}", (npm,)),
        FakeSecret("npm-token", f"//registry.npmjs.org/:_authToken={npm2}", (npm2,)),
        FakeSecret("gitlab-token", f"clone using {glpat}", (glpat,)),
        FakeSecret("gitlab-token", f"runner token {gitlab_runner}", (gitlab_runner,)),
        FakeSecret("pypi-token", f"twine upload -p {pypi}", (pypi,)),
        FakeSecret("anthropic-key", f"use {ant} for claude", (ant,)),
        FakeSecret("anthropic-key", f'ANTHROPIC_API_KEY="{ant2}"', (ant2,)),
        FakeSecret("openai-key", f"OPENAI key {oai_proj}", (oai_proj,)),
        FakeSecret("openai-key", f"legacy key {oai}", (oai,)),
        FakeSecret("google-api-key", f"maps key {google}", (google,)),
        FakeSecret("google-oauth-secret", f"client_secret: {gocspx}", (gocspx,)),
        FakeSecret("azure-storage-key",
                   f"DefaultEndpointsProtocol=https;AccountName=atlasdata;AccountKey={azure_key};"
                   "EndpointSuffix=core.windows.net", (azure_key[:40],)),
        FakeSecret("azure-client-secret", f"AAD app secret {azure_secret}", (azure_secret,)),
        FakeSecret("azure-sas-token",
                   f"https://atlas.blob.core.windows.net/raw?sv=2022-11-02&ss=b&sig={sas}",
                   (sas,)),
        FakeSecret("slack-token", f"bot {slack}", (slack,)),
        FakeSecret("slack-webhook", f"alerts go to https://hooks.slack.com/services/{slack_hook}",
                   (slack_hook,)),
        FakeSecret("jwt", f"session cookie {jwt}", (jwt,)),
        FakeSecret("bearer-token", f"Authorization: Bearer {bearer}", (bearer,)),
        FakeSecret("basic-auth", f"Authorization: Basic {basic}", (basic,)),
        FakeSecret("secret", f"export SLACK_SIGNING_SECRET={signing}", (signing,)),
        FakeSecret("secret", f'"client_secret": "{client_secret}"', (client_secret,)),
        FakeSecret("key", f"MY_APP_KEY={app_key}", (app_key,)),
        FakeSecret("huggingface-token", f"HF token {hf}", (hf,)),
        FakeSecret("sendgrid-key", f"mail via {sendgrid}", (sendgrid,)),
        FakeSecret("telegram-bot-token", f"bot api {telegram}", (telegram,)),
        FakeSecret("docker-hub-token", f"docker login -p {docker}", (docker,)),
        FakeSecret("digitalocean-token", f"doctl auth init -t {do_token}", (do_token,)),
        FakeSecret("twilio-key", f"twilio api key {twilio}", (twilio,)),
        FakeSecret("shopify-token", f"shop admin {shopify}", (shopify,)),
        FakeSecret("mailchimp-key", f"newsletter key {mailchimp}", (mailchimp,)),
        FakeSecret("discord-bot-token", f"discord bot {discord}", (discord.split(".")[2],)),
        FakeSecret("google-oauth-token", f"gcloud access token {ya29}", (ya29,)),
        FakeSecret("putty-private-key",
                   "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 3\n"
                   f"{putty}\nPrivate-MAC: {r(_HEX, 64)}", (putty.split(chr(10))[0],)),
    ]


_PROSE = (
    "Mira said the nightly load failed again around 02:10 because the extract step held the "
    "connection open while PgBouncer recycled it. We agreed to open the DB connection only "
    "after the extract, and to retry twice with jitter. The atlas project keeps its telemetry "
    "in the Kolar cluster; Ines Okafor administers it until March. Deploys never happen on "
    "Fridays; the next window is Tuesday at 11:00. Ticket ATL-5542 tracks the psycopg2 "
    "upgrade, and the whale-listen service needs a new token bucket size of 64. "
    "Sprint review moved to Thursday, and the key decision was to keep SQLite for the agent "
    "store and to test PostgreSQL with pgvector behind the same Store protocol. "
)


def _kilobyte(extra: str = "") -> str:
    text = (_PROSE * 3)[: 1024 - len(extra)]
    return text + extra


def _median_us(fn: Callable[[str], Any], text: str, runs: int, loops: int) -> float:
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn(text)
        samples.append((time.perf_counter() - t0) / loops * 1e6)
    return statistics.median(samples)


_GENERIC_TYPES = {"Base64 High Entropy String", "Hex High Entropy String", "Secret Keyword",
                  "Basic Auth Credentials"}
_ENTROPY_TYPES = {"Base64 High Entropy String", "Hex High Entropy String"}


def _detect_secrets() -> Callable[[str], list[str]] | None:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def scan(text: str) -> list[str]:
        with default_settings():
            return [s.type for line in text.splitlines() for s in scan_line(line)]

    return scan


def main(argv: list[str] | None = None) -> None:
    """Print one JSON line: µs per KB for both detectors, false alarms and corpus coverage."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench secrets")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--loops", type=int, default=200)
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args(argv)
    corpus = fake_secrets(args.seed)
    clean = _kilobyte()
    dirty = _kilobyte(" and the loader uses " + corpus[22].text)
    labelled = sum(1 for s in corpus if s.label in {x[2] for x in find_secrets(s.text)})
    result: dict[str, Any] = {
        "bench": "secrets", "runs": args.runs, "corpus": len(corpus),
        "tideline": {
            "us_per_kb_clean": round(_median_us(find_secrets, clean, args.runs, args.loops), 1),
            "us_per_kb_one_secret": round(_median_us(find_secrets, dirty, args.runs,
                                                     args.loops), 1),
            "false_alarms_clean_kb": len(find_secrets(clean)),
            "found": sum(1 for s in corpus if find_secrets(s.text)),
            "right_vendor_label": labelled,
        },
    }
    theirs = _detect_secrets()
    if theirs is None:
        result["detect_secrets"] = "not installed (pip install detect-secrets)"
    else:
        loops = max(1, args.loops // 20)
        types = [set(theirs(s.text)) for s in corpus]
        result["detect_secrets"] = {
            "us_per_kb_clean": round(_median_us(theirs, clean, args.runs, loops), 1),
            "us_per_kb_one_secret": round(_median_us(theirs, dirty, args.runs, loops), 1),
            "false_alarms_clean_kb": len(theirs(clean)),
            "found": sum(1 for t in types if t),
            "found_without_entropy_plugins": sum(1 for t in types if t - _ENTROPY_TYPES),
            "vendor_named": sum(1 for t in types if t - _GENERIC_TYPES),
            "no_vendor_plugin_for": sorted({s.label for s, t in zip(corpus, types, strict=True)
                                            if not t - _GENERIC_TYPES}),
        }
    print(json.dumps(result))
