"""A held-out-style corpus of fake credentials: 80+ kinds, each in the context it is seen in.

Written for issue 33 item 4 independently of ``tideline.bench.secrets``' corpus (which
was built next to the rules): every item here is a *kind* of credential a user pastes
into an agent's conversation, drawn at random in the vendor's documented shape. None is
real: the characters are random, and checksummed formats fail their checksum.
"""

from __future__ import annotations

import base64
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

_LOWER = string.ascii_lowercase
_ALNUM = string.ascii_letters + string.digits
_LOWNUM = _LOWER + string.digits
_UPNUM = string.ascii_uppercase + string.digits
_URLSAFE = _ALNUM + "_-"
_B64 = _ALNUM + "+/"
_HEX = "0123456789abcdef"
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


@dataclass(frozen=True)
class Kind:
    """One kind of credential in its context.

    Attributes:
        name: the kind (vendor and format).
        text: where it appears.
        needle: the part that must not survive.
    """

    name: str
    text: str
    needle: str


def corpus(seed: int = 33) -> list[Kind]:
    """The corpus, one item per kind (reproducible from ``seed``)."""
    rng = random.Random(seed)

    def r(alphabet: str, n: int) -> str:
        # At least one digit and one letter where the alphabet has both, as real tokens do.
        while True:
            out = "".join(rng.choice(alphabet) for _ in range(n))
            if n < 8 or not (set(alphabet) & set(string.digits)) or alphabet.isdigit() or (
                    any(c.isdigit() for c in out) and any(c.isalpha() for c in out)):
                return out

    def uuid() -> str:
        return "-".join(r(_HEX, n) for n in (8, 4, 4, 4, 12))

    def pw(n: int) -> str:
        return r(_LOWER, 3) + r(_ALNUM, n - 5) + rng.choice("!#%*") + r(string.digits, 1)

    items: list[tuple[str, Callable[[], tuple[str, str]]]] = []

    def kind(name: str) -> Callable[[Callable[[], tuple[str, str]]], None]:
        def add(fn: Callable[[], tuple[str, str]]) -> None:
            items.append((name, fn))
        return add

    def token(name: str, context: str, secret: Callable[[], str]) -> None:
        def make() -> tuple[str, str]:
            s = secret()
            return context.format(s=s), s
        items.append((name, make))

    # -- the 37 kinds the probe named -----------------------------------------------------
    token("databricks", "export DATABRICKS_HOST=adb-1.azuredatabricks.net; token {s}",
          lambda: "dapi" + r(_HEX, 32))
    token("mailgun", "mailgun api key: {s} for the eu domain", lambda: "key-" + r(_HEX, 32))
    token("square-access", "square prod access token {s}",
          lambda: "sq0atp-" + r(_URLSAFE, 22))
    token("square-eaaa", "SQUARE_ACCESS_TOKEN is {s} (sandbox)",
          lambda: "EAAA" + r(_URLSAFE, 60))
    token("doppler", "doppler service token {s} scoped to prd",
          lambda: "dp.pt." + r(_ALNUM, 43))
    token("vault", "vault login {s}", lambda: "hvs." + r(_URLSAFE, 90))
    token("linear", "the linear key {s} lets the bot file issues",
          lambda: "lin_api_" + r(_ALNUM, 40))
    token("notion-secret", "notion integration: {s}", lambda: "secret_" + r(_ALNUM, 43))
    token("notion-ntn", "notion token {s}",
          lambda: "ntn_" + r(string.digits, 11) + r(_ALNUM, 35))
    token("grafana-sa", "grafana service account {s}",
          lambda: "glsa_" + r(_ALNUM, 32) + "_" + r(_HEX, 8))
    token("grafana-cloud", "grafana cloud {s}", lambda: "glc_" + r(_B64, 120) + "==")
    token("newrelic", "new relic user key {s}", lambda: "NRAK-" + r(_UPNUM, 27))
    token("sentry-dsn", "SENTRY_DSN=https://{s}@o450123.ingest.sentry.io/5512345",
          lambda: r(_HEX, 32))

    @kind("heroku-uuid")
    def _heroku() -> tuple[str, str]:
        s = uuid()
        return f"my heroku api key is {s}, please rotate after the demo", s

    token("atlassian", "jira token for ci: {s}", lambda: "ATATT3" + r(_URLSAFE, 180))
    token("postman", "postman {s}", lambda: f"PMAK-{r(_HEX, 24)}-{r(_HEX, 34)}")
    token("pulumi", "PULUMI_ACCESS_TOKEN={s}", lambda: "pul-" + r(_HEX, 40))
    token("terraform-cloud", "credentials app.terraform.io token {s}",
          lambda: r(_LOWNUM, 14) + ".atlasv1." + r(_URLSAFE, 67))
    token("supabase", "supabase personal token {s}", lambda: "sbp_" + r(_HEX, 40))
    token("airtable", "airtable pat {s}", lambda: "pat" + r(_ALNUM, 14) + "." + r(_HEX, 64))
    token("figma", "figma {s}", lambda: "figd_" + r(_URLSAFE, 40))
    token("replicate", "replicate {s}", lambda: "r8_" + r(_ALNUM, 37))
    token("groq", "groq {s}", lambda: "gsk_" + r(_ALNUM, 52))
    token("perplexity", "pplx key {s}", lambda: "pplx-" + r(_ALNUM, 48))
    token("xai", "grok api {s}", lambda: "xai-" + r(_ALNUM, 80))
    token("age", "age identity {s}", lambda: "AGE-SECRET-KEY-1" + r(_BECH32, 58))
    token("ethereum", "the deployer wallet private key is 0x{s}", lambda: r(_HEX, 64))
    token("mapbox", "mapbox secret {s}",
          lambda: "sk.eyJ1Ijoi" + r(_URLSAFE, 50) + "." + r(_URLSAFE, 22))
    token("flyio", "fly deploy with FlyV1 {s}", lambda: "fm2_" + r(_B64, 140))

    @kind("kubeconfig")
    def _kube() -> tuple[str, str]:
        pem = "-----BEGIN RSA PRIVATE KEY-----\n" + r(_B64, 64) + "\n"
        s = base64.b64encode(pem.encode()).decode()
        return f"users:\n- name: admin\n  user:\n    client-key-data: {s}\n", s[20:60]

    @kind("netrc")
    def _netrc() -> tuple[str, str]:
        s = pw(12)
        return f"machine api.heroku.com\n  login ana@example.com\n  password {s}\n", s

    @kind("mysql-cli")
    def _mysql() -> tuple[str, str]:
        s = pw(11)
        return f"run mysql -h db.internal -u root -p{s} shop < dump.sql", s

    @kind("sql-identified")
    def _sql() -> tuple[str, str]:
        s = pw(13)
        return f"CREATE USER 'etl'@'%' IDENTIFIED BY '{s}';", s

    @kind("cookie-session")
    def _cookie() -> tuple[str, str]:
        s = r(_LOWNUM, 32)
        return f"curl -H 'Cookie: sessionid={s}; lang=en' https://app.example.com", s

    @kind("pgpassword")
    def _pgpw() -> tuple[str, str]:
        s = pw(12)
        return f"PGPASSWORD={s} psql -h db -U app", s

    @kind("dbpassword")
    def _dbpw() -> tuple[str, str]:
        s = pw(10)
        return f"set DBPASSWORD={s} in the unit file", s

    token("okta", "Authorization: SSWS {s}", lambda: "00" + r(_URLSAFE, 40))

    # -- more vendors ---------------------------------------------------------------------
    token("aws-access-key-id", "key id {s}", lambda: "AKIA" + r(_UPNUM, 16))
    token("github-classic", "gh token {s}", lambda: "ghp_" + r(_ALNUM, 36))
    token("github-fine-grained", "{s}",
          lambda: "github_pat_" + r(_ALNUM, 22) + "_" + r(_ALNUM, 59))
    token("gitlab", "gitlab {s}", lambda: "glpat-" + r(_URLSAFE, 20))
    token("openai", "OPENAI_API_KEY={s}", lambda: "sk-proj-" + r(_URLSAFE, 60))
    token("anthropic", "claude key {s}", lambda: "sk-ant-api03-" + r(_URLSAFE, 95))
    token("slack-bot", "slack {s}",
          lambda: f"xoxb-{r(string.digits, 12)}-{r(string.digits, 13)}-{r(_ALNUM, 24)}")
    token("slack-app", "socket mode {s}",
          lambda: f"xapp-1-A{r(_UPNUM, 10)}-{r(string.digits, 13)}-{r(_HEX, 64)}")
    token("stripe", "stripe {s}", lambda: "sk_live_" + r(_ALNUM, 24))
    token("sendgrid", "sendgrid {s}", lambda: f"SG.{r(_URLSAFE, 22)}.{r(_URLSAFE, 43)}")
    token("huggingface", "hf {s}", lambda: "hf_" + r(_ALNUM, 34))
    token("npm", "npm {s}", lambda: "npm_" + r(_ALNUM, 36))
    token("pypi", "twine password {s}", lambda: "pypi-AgEIcHlwaS5vcmc" + r(_URLSAFE, 70))
    token("docker", "docker login -u ana --password-stdin <<< {s}",
          lambda: "dckr_pat_" + r(_URLSAFE, 27))
    token("google-api", "maps {s}", lambda: "AIza" + r(_URLSAFE, 35))
    token("digitalocean", "doctl auth init -t {s}", lambda: "dop_v1_" + r(_HEX, 64))
    token("shopify", "shopify admin {s}", lambda: "shpat_" + r(_HEX, 32))
    token("langsmith", "LANGSMITH_API_KEY {s}",
          lambda: "lsv2_pt_" + r(_HEX, 32) + "_" + r(_HEX, 10))
    token("tavily", "tavily {s}", lambda: "tvly-" + r(_ALNUM, 32))
    token("elevenlabs", "eleven {s}", lambda: "sk_" + r(_HEX, 48))
    token("dynatrace", "dt {s}",
          lambda: "dt0c01." + r(_UPNUM, 24) + "." + r(_UPNUM, 64))
    token("alibaba", "aliyun id {s}", lambda: "LTAI" + r(_ALNUM, 20))
    token("tencent", "tencent {s}", lambda: "AKID" + r(_ALNUM, 32))
    token("planetscale", "pscale {s}", lambda: "pscale_tkn_" + r(_URLSAFE, 43))
    token("sonarqube", "sonar {s}", lambda: "squ_" + r(_HEX, 40))
    token("buildkite", "buildkite {s}", lambda: "bkua_" + r(_HEX, 40))
    token("rubygems", "gem credentials {s}", lambda: "rubygems_" + r(_HEX, 48))
    token("circleci", "circle {s}",
          lambda: "CCIPAT_" + r(_ALNUM, 22) + "_" + r(_HEX, 40))
    token("contentful", "contentful {s}", lambda: "CFPAT-" + r(_URLSAFE, 43))
    token("prefect", "prefect {s}", lambda: "pnu_" + r(_ALNUM, 36))
    token("brevo", "brevo {s}", lambda: f"xkeysib-{r(_HEX, 64)}-{r(_ALNUM, 16)}")
    token("resend", "resend {s}", lambda: f"re_{r(_ALNUM, 8)}_{r(_ALNUM, 24)}")
    token("posthog", "posthog personal {s}", lambda: "phx_" + r(_ALNUM, 43))
    token("hubspot", "hubspot {s}", lambda: f"pat-na1-{uuid()}")
    token("discord-webhook", "alerts go to https://discord.com/api/webhooks/"
          "1234567890123/{s}", lambda: r(_URLSAFE, 68))
    token("twilio", "twilio api key {s}", lambda: "SK" + r(_HEX, 32))
    token("jwt", "the session jwt {s}",
          lambda: "eyJhbGciOiJIUzI1NiJ9.eyJ" + r(_URLSAFE, 40) + "." + r(_URLSAFE, 43))
    token("bearer", "Authorization: Bearer {s}", lambda: r(_URLSAFE, 40))
    token("cli-api-key-flag", "run ./sync --api-key {s} --dry-run", lambda: r(_ALNUM, 32))

    @kind("cli-password-flag")
    def _flag() -> tuple[str, str]:
        s = pw(12)
        return f"redis-cli --pass {s} -h cache ping", s

    @kind("pg-url")
    def _pgurl() -> tuple[str, str]:
        s = pw(14)
        return f"DATABASE_URL=postgres://app:{s}@db.internal:5432/app", s

    @kind("openssh-key")
    def _ssh() -> tuple[str, str]:
        body = r(_B64, 70)
        return (f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n"
                "-----END OPENSSH PRIVATE KEY-----", body)

    @kind("ec-key")
    def _ec() -> tuple[str, str]:
        body = r(_B64, 64)
        return f"-----BEGIN EC PRIVATE KEY-----\n{body}\n-----END EC PRIVATE KEY-----", body

    @kind("encrypted-key")
    def _enc() -> tuple[str, str]:
        body = r(_B64, 64)
        return (f"-----BEGIN ENCRYPTED PRIVATE KEY-----\n{body}\n"
                "-----END ENCRYPTED PRIVATE KEY-----", body)

    @kind("base64-pem")
    def _b64pem() -> tuple[str, str]:
        pem = "-----BEGIN PRIVATE KEY-----\n" + r(_B64, 48) + "\n"
        s = base64.b64encode(pem.encode()).decode()
        return f"TLS_KEY_B64 {s}", s[30:70]

    @kind("jwk-private")
    def _jwk() -> tuple[str, str]:
        d = r(_URLSAFE, 43)
        return f'{{"kty":"EC","crv":"P-256","x":"{r(_URLSAFE, 43)}","d":"{d}"}}', d

    @kind("yaml-password")
    def _yaml() -> tuple[str, str]:
        s = pw(10)
        return f"smtp:\n  user: mailer\n  password: {s}\n", s

    @kind("azure-conn")
    def _azure() -> tuple[str, str]:
        s = r(_B64, 86) + "=="
        return (f"DefaultEndpointsProtocol=https;AccountName=atlas;AccountKey={s};"
                "EndpointSuffix=core.windows.net", s)

    @kind("sql-alter-role")
    def _role() -> tuple[str, str]:
        s = pw(12)
        return f"ALTER ROLE reporting WITH LOGIN PASSWORD '{s}';", s

    out = []
    for name, make in items:
        text, needle = make()
        out.append(Kind(name, text, needle))
    return out
