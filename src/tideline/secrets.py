"""Secret detection and redaction: credentials never reach the store.

Every text that enters (memories, turns, names, queries, dream output) passes
:func:`redact_secrets` in :func:`tideline.write.validate.clean_text`; the journal
and sleep state pass it again on the way into their tables (:func:`redact_json`),
so an error message or a derived keyword cannot carry a secret in either.

Each rule names one credential format and the vendor it belongs to, so a label
says what was found (``anthropic-key``, not ``openai-key``). A rule runs only
when one of its keywords occurs in the text (case-folded), which keeps the cost
for text without credentials near that of a few substring searches; the
measurements behind choosing these rules over ``detect-secrets``' plugins are in
``docs/architecture.md``.

Only the secret itself is replaced: ``DB_PASSWORD=[REDACTED:password]``,
``postgres://admin:[REDACTED:url-password]@db``, so the memory still says what
the secret was for.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SECRET_LABELS", "find_secrets", "redact_json", "redact_secrets", "rule_count"]


@dataclass(frozen=True)
class _Rule:
    label: str
    regex: str
    keywords: tuple[str, ...]
    # Characters that may not touch the match on either side. Checked after the match
    # rather than with a look-behind, which would stop ``re`` from skipping ahead to
    # the pattern's first literal and cost ~0.2 ms per KB.
    edge: re.Pattern[str] | None = None
    # Where a keyword (lower case) sits in a match: matches are tried only at keyword
    # positions, ``offset`` characters before them (None: the keyword may sit anywhere,
    # and the whole text is searched when one occurs). A rule without keywords opens
    # with a case-sensitive literal, which ``re`` finds about as fast as ``str.find``.
    offset: int | None = 0
    # An assignment (``name = value``): the name must end an identifier (``DB_PASSWORD``,
    # ``dbPassword``, not ``monkey``), placeholders and references are no secrets, and a
    # ``name: value`` inside a sentence counts only when the value looks like one.
    assignment: bool = False
    # Data rules (``secret_rules.json``): the secret's least Shannon entropy in bits per
    # character, and a text its base64 decoding must hold.
    entropy: float = 0.0
    decoded: str | None = None
    checked: bool = False  # a data rule: placeholders, entropy and decoding are checked
    # A token rule: the match lies inside one run of token characters (``_RUN``), so it
    # is tried only on the runs of a text; prose has few or none. ``context`` must then
    # match the text just before the match.
    run: bool = False
    context: re.Pattern[str] | None = None

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        # Compiled on first use: most rules never see their keyword in a process, and
        # a hook that stores one turn should not pay for compiling a hundred patterns.
        return re.compile(self.regex)


def _rule(label: str, pattern: str, *keywords: str, edge: str | None = None,
          offset: int | None = 0, assignment: bool = False) -> _Rule:
    return _Rule(label, pattern, tuple(k.lower() for k in keywords),
                 re.compile(f"[{edge}]") if edge else None, offset, assignment)


# An assignment's value: quoted (JSON, YAML, shell) or bare up to a delimiter.
_NAME_END = r"(?![A-Za-z0-9_])[\"']?[ \t]*(?P<sep>=>|:=|[:=])[ \t]*"
_VALUE = (r"(?:\"(?P<v>(?:[^\"\\\n]|\\.){1,1000})\"|'(?P<v2>[^'\n]{1,1000})'"
          r"|(?P<v3>[^\s\"',;&<>]{1,1000}))")
_SHAPED_VALUE = (r"(?:\"(?P<v>[^\"\\\n]{8,1000})\"|'(?P<v2>[^'\n]{8,1000})'"
                r"|(?P<v3>(?=[^\s\"',;&]*[0-9_+/=-])[^\s\"',;&<>]{8,1000}))")
_ALNUM_EDGE = "A-Za-z0-9"
_WORD_EDGE = "A-Za-z0-9_-"

_HEAD_RULES: tuple[_Rule, ...] = (
    # -- private keys ----------------------------------------------------------------
    _rule("pgp-private-key",
          r"-----BEGIN PGP PRIVATE KEY BLOCK-----[\s\S]*?"
          r"(?:-----END PGP PRIVATE KEY BLOCK-----|\Z)"),
    _rule("private-key",
          r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
          r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)"),
    _rule("putty-private-key", r"PuTTY-User-Key-File-\d+:[\s\S]*?(?:Private-MAC: ?[0-9a-f]+|\Z)"),
    # -- cloud providers -------------------------------------------------------------
    _rule("aws-access-key-id",
          r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[0-9A-Z]{16}",
          edge="A-Z0-9"),
    _rule("aws-secret-key",
          r"(?i:aws|amazon)[\w .-]{0,30}?(?i:secret|sk\b|key)[\w\s\"':=>()-]{0,30}?"
          r"(?<![A-Za-z0-9/+])(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
          "aws", "amazon"),
    _rule("aws-secret-key",
          r"(?:AKIA|ASIA)[0-9A-Z]{16}[\s\S]{1,80}?"
          r"(?<![A-Za-z0-9/+])(?P<v>(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[0-9/+])"
          r"[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"),
    _rule("aws-session-token",
          r"(?i:session[_-]?token|security-token)[\"']?\s*[:=]\s*[\"']?"
          r"(?P<v>[A-Za-z0-9/+=]{100,})",
          "session_token", "session-token", "sessiontoken", "security-token"),
    _rule("gcp-service-account-key", r"\"private_key_id\"\s*:\s*\"(?P<v>[0-9a-f]{40})\""),
    _rule("google-api-key", r"AIza[0-9A-Za-z_-]{35}", edge=_WORD_EDGE),
    _rule("google-oauth-secret", r"GOCSPX-[A-Za-z0-9_-]{28}"),
    _rule("google-oauth-token", r"ya29\.[0-9A-Za-z_-]{20,}"),
    _rule("azure-storage-key",
          r"(?i:AccountKey|SharedAccessKey)\s*=\s*(?P<v>[A-Za-z0-9+/]{40,}={0,2})",
          "accountkey", "sharedaccesskey"),
    _rule("azure-sas-token",
          r"[?&]sig=(?P<v>[A-Za-z0-9%+/]{30,}(?:%3D|=){0,2})", "sig=", offset=1),
    _rule("azure-client-secret", r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}", "q~",
          edge="A-Za-z0-9_~.-", offset=4),
    _rule("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64}"),
    # -- code hosting and package registries -----------------------------------------
    _rule("github-token", r"gh[pousr]_[A-Za-z0-9]{36,255}"),
    _rule("github-token", r"github_pat_[A-Za-z0-9_]{22,255}"),
    _rule("gitlab-token", r"gl(?:pat|dt|rt|ptt|cbt|ft|imt|oas|soat|agent)-[A-Za-z0-9_-]{20,}"),
    _rule("gitlab-token", r"GR1348941[A-Za-z0-9_-]{20,}"),
    _rule("npm-token", r"npm_[A-Za-z0-9]{36}", edge=_ALNUM_EDGE),
    _rule("npm-token", r"_authToken\s*=\s*(?P<v>[^\s\"']{8,})"),
    _rule("pypi-token", r"pypi-AgE[A-Za-z0-9_-]{50,}"),
    _rule("huggingface-token", r"hf_[A-Za-z0-9]{34,}"),
    _rule("docker-hub-token", r"dckr_pat_[A-Za-z0-9_-]{20,}"),
    # -- chat, payments, mail --------------------------------------------------------
    _rule("slack-token", r"xox[abposre]-(?:\d+-)?[A-Za-z0-9-]{10,}"),
    _rule("slack-webhook",
          r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9/_+-]{20,})"),
    _rule("discord-bot-token",
          r"(?<=[MNO][A-Za-z0-9_-]{23})\.[A-Za-z0-9_-]{6}\."
          r"(?=[A-Za-z0-9_-]{0,37}[0-9])[A-Za-z0-9_-]{27,38}(?![A-Za-z0-9_-])"),
    _rule("telegram-bot-token", r"(?<=[0-9]{8}):AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])", ":aa"),
    _rule("stripe-key", r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", "_live_", "_test_",
          offset=None),
    _rule("stripe-webhook-secret", r"whsec_[A-Za-z0-9]{24,}"),
    _rule("sendgrid-key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}"),
    _rule("mailchimp-key", r"[0-9a-f]{32}-us\d{1,2}", "-us", edge=_ALNUM_EDGE, offset=32),
    _rule("twilio-key", r"(?:SK|AC)[0-9a-f]{32}", "sk", "ac", edge=_ALNUM_EDGE),
    _rule("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    # -- AI providers: Anthropic before OpenAI, whose ``sk-`` prefix it shares ----------
    _rule("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    _rule("openai-key", r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
)

# After the vendor formats of ``secret_rules.json`` (a rule's place is its priority when
# two rules find the same span).
_TAIL_RULES: tuple[_Rule, ...] = (
    # -- tokens by shape --------------------------------------------------------------
    _rule("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    _rule("bearer-token",
          r"(?i:bearer|token)\s+(?P<v>(?=[A-Za-z0-9._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)",
          "bearer", "token"),
    _rule("basic-auth",
          r"(?i:basic)\s+(?P<v>(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])"
          r"(?=[A-Za-z0-9+/=]*[0-9+/=])[A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/=])",
          "basic"),
    # -- credentials in URLs and assignments ------------------------------------------
    # A password in a URL may hold anything but a slash (people do not percent-encode
    # ``#`` or ``?``); it runs to the last ``@`` before the host.
    _rule("url-password", r"://[^\s:/?#@\"'<>]{0,256}:(?P<v>[^\s/\"'<>]{1,256})@"),
    _rule("password", r"(?i:pass(?:word|wd|phrase)|pwd)" + _NAME_END + _VALUE,
          "pass", "pwd", assignment=True),
    _rule("password", r"(?i:pass)(?<=[_.-](?i:pass))" + _NAME_END + _VALUE,
          "pass", assignment=True),
    _rule("password",
          r"(?i:\b(?:password|passwd|passphrase|pwd)\s+(?:is|was|=)\s+)"
          r"(?:\"(?P<v>[^\"\n]{1,200})\"|'(?P<v2>[^'\n]{1,200})'"
          r"|(?P<v3>(?=\S*[0-9!@#$%^&*_+=~?])[^\s\"',;]{3,200}))",
          "pass", "pwd"),
    _rule("secret", r"(?i:secret[_-]?key|secret)" + _NAME_END + _VALUE,
          "secret", assignment=True),
    _rule("token", r"(?i:token)" + _NAME_END + _VALUE, "token", assignment=True),
    _rule("api-key",
          r"(?i:api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|auth)"
          + _NAME_END + _VALUE,
          "api", "access", "private", "credential", "auth", assignment=True),
    _rule("key", r"(?i:key)" + _NAME_END + _SHAPED_VALUE, "key", assignment=True),
)


@functools.cache
def _data_rules() -> tuple[_Rule, ...]:
    """The rules of ``secret_rules.json`` (parsed once, on the first text that needs them)."""
    raw = Path(__file__).with_name("secret_rules.json").read_text(encoding="utf-8")
    rules = []
    for entry in json.loads(raw)["rules"]:
        offset = int(entry.get("offset", 0))
        edge = entry.get("edge")
        context = entry.get("context")
        rules.append(_Rule(
            label=str(entry["label"]), regex=str(entry["regex"]),
            keywords=tuple(str(k).lower() for k in entry["keywords"]),
            edge=re.compile(f"[{edge}]") if edge else None,
            offset=None if offset < 0 else offset,
            entropy=float(entry.get("entropy", 0.0)), decoded=entry.get("decoded"),
            checked=True, run=bool(entry.get("run", entry.get("kind") == "vendor")),
            context=re.compile(context) if context else None))
    return tuple(rules)


@functools.cache
def _all_rules() -> tuple[_Rule, ...]:
    return (*_HEAD_RULES, *_data_rules(), *_TAIL_RULES)


def rule_count() -> int:
    """How many rules the redactor runs (the hand-written ones and the data file's)."""
    return len(_all_rules())


#: Every label :func:`redact_secrets` can report, in rule order (built on first access by
#: the module ``__getattr__``: it needs the data file).
SECRET_LABELS: tuple[str, ...]


def __getattr__(name: str) -> Any:
    # ``SECRET_LABELS`` needs the data file; built when asked for, not at import.
    if name == "SECRET_LABELS":
        return tuple(dict.fromkeys(r.label for r in _all_rules()))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_VALUE_GROUPS = ("v", "v2", "v3")
# A run of token characters, where a token rule's match must lie.
_RUN = re.compile(r"[A-Za-z0-9_+/=.~%$-]{16,}")
# Every rule's match holds a run of 16 token characters or one of these words; a text
# with neither is let through after a few substring searches.
_LONG_RUN = re.compile(r"[A-Za-z0-9_+/=.~%$-]{16}")
_GATE_WORDS = ("://", "pass", "pwd", "secret", "token", "key", "auth", "credential", "basic",
               "-----begin", "mysql", "mariadb", "identified", "sess", "sid=", "ssws", "login",
               "machine")
_PLACEHOLDER = re.compile(
    r"^(?:\[REDACTED(?::[a-z0-9-]+)?\]|\*+|x{3,}|X{3,}|\.{3}|…|<[^<>]*>|\$\{?[A-Za-z_][\w.]*\}?"
    r"|\{\{[^{}]*\}\}|%\([^)]*\)s|%s|(?i:null|none|nil|true|false|undefined|required|optional"
    r"|changeme|redacted|hidden|secret|password|string|your[_-][\w-]*|os\.environ.*"
    r"|process\.env.*|env\(.*))$"
)


def find_secrets(text: str) -> list[tuple[int, int, str]]:
    """Locate the credentials in ``text``.

    Args:
        text: any text.

    Returns:
        ``(start, end, label)`` of each secret, in text order and never overlapping;
        where two rules find the same span, the more specific (earlier) rule's label wins.
    """
    if len(text) < 8:
        return []
    lowered = text.lower()
    first = _LONG_RUN.search(text)
    if not (first or any(w in lowered for w in _GATE_WORDS)):
        return []  # most names, tags and short sentences: no rule can match
    if first is None or len(lowered) != len(text):
        return _scan(text, lowered, [])
    # The runs start at the first one the gate found: the text before it has none.
    return _scan(text, lowered, [m.span() for m in _RUN.finditer(text, first.start())])


def _scan(text: str, lowered: str,
          runs: list[tuple[int, int]] | None = None) -> list[tuple[int, int, str]]:
    """Every rule over ``text`` (``lowered`` is ``text.lower()``), overlaps resolved.

    ``runs``: the text's runs of token characters when already known ([] when the fast
    gate found none), else found here.
    """
    aligned = len(lowered) == len(text)  # else (a rare 'İ') positions differ: search all
    spans: list[tuple[int, int, int, str]] = []
    if runs is None or not aligned:
        runs = [m.span() for m in _RUN.finditer(text)] if aligned else []
    rules = _all_rules()
    for priority in _candidates(lowered, runs, aligned):
        rule = rules[priority]
        if rule.run and aligned:
            found: Iterator[re.Match[str]] = _run_matches(rule, text, lowered, runs)
        else:
            found = _matches(rule, text, lowered, aligned)
        for m in found:
            start, end = _secret_span(m)
            if end <= start or (rule.edge is not None and _touches(rule.edge, text, m)):
                continue
            if rule.assignment and not _plausible(m, text, start, end):
                continue
            if rule.checked and not _checks(rule, text[start:end]):
                continue
            spans.append((start, end, priority, rule.label))
    if not spans:
        return []
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0]), s[2]))
    out: list[tuple[int, int, str]] = []
    taken_until = -1
    for start, end, _priority, label in spans:
        if start < taken_until:
            continue
        out.append((start, end, label))
        taken_until = end
    return _prefer_vendor(out, spans)


@functools.cache
def _text_index(with_token_rules: bool) -> tuple[tuple[tuple[str, tuple[int, ...]], ...],
                                                 tuple[int, ...]]:
    """Rules by keyword (rule positions), and the rules without keywords; the token rules
    only ``with_token_rules`` (else they are looked up in the runs, not the whole text)."""
    by_keyword: dict[str, list[int]] = {}
    always = []
    for priority, rule in enumerate(_all_rules()):
        if rule.run and not with_token_rules:
            continue
        if not rule.keywords:
            always.append(priority)
        for keyword in rule.keywords:
            by_keyword.setdefault(keyword, []).append(priority)
    return tuple((k, tuple(v)) for k, v in by_keyword.items()), tuple(always)


def _candidates(lowered: str, runs: list[tuple[int, int]], aligned: bool) -> list[int]:
    """The rules worth trying on a text, in priority order.

    Each distinct keyword is looked for once, however many rules share it (a substring
    search over the text is the cost that counts); a token rule needs its keyword inside
    a run of token characters (when positions align), so its keywords are looked for in
    the runs only, and a text without runs skips every token rule at once.
    """
    by_keyword, always = _text_index(not aligned)
    found = set(always)
    for keyword, priorities in by_keyword:
        if keyword in lowered:
            found.update(priorities)
    if aligned and runs:
        # One string of the runs (no keyword holds a space): one C search per keyword.
        pieces = " ".join(lowered[lo:hi] for lo, hi in runs)
        run_keywords, run_always = _run_index()
        found.update(run_always)
        for keyword, priorities in run_keywords:
            if keyword in pieces:
                found.update(priorities)
    return sorted(found)


@functools.cache
def _run_index() -> tuple[tuple[tuple[str, tuple[int, ...]], ...], frozenset[int]]:
    """Token rules by keyword (rule positions), and the token rules without keywords."""
    by_keyword: dict[str, list[int]] = {}
    always = set()
    for priority, rule in enumerate(_all_rules()):
        if not rule.run:
            continue
        if not rule.keywords or rule.offset is None:
            always.add(priority)
        for keyword in rule.keywords:
            by_keyword.setdefault(keyword, []).append(priority)
    return tuple((k, tuple(v)) for k, v in by_keyword.items()), frozenset(always)


def _run_matches(rule: _Rule, text: str, lowered: str,
                 runs: list[tuple[int, int]]) -> Iterator[re.Match[str]]:
    """A token rule's matches: inside the runs of token characters only."""
    for lo, hi in runs:
        if rule.keywords and rule.offset is not None:
            found: Iterator[re.Match[str]] = _matches(rule, text, lowered, True, lo, hi)
        else:
            found = rule.pattern.finditer(text, lo, hi)
        for m in found:
            if rule.context is None or rule.context.search(
                    text, max(0, m.start() - 80), m.start()):
                yield m


def _matches(rule: _Rule, text: str, lowered: str, aligned: bool,
             lo: int = 0, hi: int | None = None) -> Iterator[re.Match[str]]:
    """The rule's matches, tried only where one of its keywords occurs."""
    if not rule.keywords:  # the pattern opens with a literal: ``re`` skips to it fast
        yield from rule.pattern.finditer(text)
        return
    if rule.offset is None or not aligned:
        if any(k in lowered for k in rule.keywords):
            yield from rule.pattern.finditer(text)
        return
    hi = len(text) if hi is None else hi
    starts: set[int] = set()
    for keyword in rule.keywords:
        at = lowered.find(keyword, lo, hi)
        while at >= 0:
            if at - rule.offset >= lo:
                starts.add(at - rule.offset)
            at = lowered.find(keyword, at + 1, hi)
    reached = -1
    for start in sorted(starts):
        if start < reached:
            continue  # inside the previous match
        m = rule.pattern.match(text, start)
        if m is not None:
            reached = m.end()
            yield m


def _touches(edge: re.Pattern[str], text: str, m: re.Match[str]) -> bool:
    before = text[m.start() - 1] if m.start() else ""
    after = text[m.end()] if m.end() < len(text) else ""
    return bool(edge.match(before) or edge.match(after))


def _checks(rule: _Rule, secret: str) -> bool:
    """A data rule's entropy and decoding conditions on the found ``secret``."""
    secret = secret.strip("'\"")
    if _PLACEHOLDER.match(secret):
        return False
    if rule.entropy:
        import math  # here: a process that never meets such a rule never imports these
        from collections import Counter

        counts = Counter(secret)
        bits = -sum(c / len(secret) * math.log2(c / len(secret)) for c in counts.values())
        if bits < rule.entropy:
            return False
    if rule.decoded:
        import base64
        import binascii

        try:
            plain = base64.b64decode(secret + "=" * (-len(secret) % 4))
        except (binascii.Error, ValueError):
            return False
        return rule.decoded.encode() in plain
    return True


_SECRETISH = re.compile(r"[0-9!@#$%^&*_+=~?/\\-]")


def _plausible(m: re.Match[str], text: str, start: int, end: int) -> bool:
    """Whether an assignment's value may be a secret (see :class:`_Rule`)."""
    value = text[start:end].strip().strip("`")  # a Markdown code span's edge is no secret
    if not value or value.startswith("[REDACTED:") or _PLACEHOLDER.match(value):
        return False
    name_at = m.start()
    if name_at and text[name_at - 1].isalnum() and not (
            text[name_at].isupper() and text[name_at - 1].islower()) and not _env_password(text, m):
        return False  # ``monkey = …``, ``bypass: …``: the word is not the name's end
    if m.group("sep") != ":" or m.group("v3") is None:
        return True
    line_start = text.rfind("\n", 0, m.start()) + 1
    if not text[line_start:m.start()].strip(" \t-{,\"'"):
        return True  # YAML, a config line, a header: the name opens its line
    return bool(_SECRETISH.search(value))


_ENV_PASSWORD = re.compile(r"[A-Z0-9_]*PASS(?:WORD|WD|PHRASE)")


def _env_password(text: str, m: re.Match[str]) -> bool:
    """``PGPASSWORD=``, ``DBPASSWORD=``: an upper-case variable name ending in PASSWORD."""
    start = m.start()
    while start and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    name = text[start:m.start("sep")].rstrip(" \t\"'")
    return _ENV_PASSWORD.fullmatch(name) is not None


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    groups = m.re.groupindex
    for name in _VALUE_GROUPS:
        if name in groups and m.group(name) is not None:
            return m.span(name)
    return m.span()


def _prefer_vendor(
    chosen: list[tuple[int, int, str]], spans: Sequence[tuple[int, int, int, str]]
) -> list[tuple[int, int, str]]:
    """Name the vendor when a format rule found a secret inside a generic assignment.

    ``GITHUB_TOKEN="ghp_…"`` is found both as a token assignment (the quoted value)
    and as a GitHub token; the span is the same or nearly so, and the label should
    say GitHub.
    """
    generic = {"password", "secret", "token", "api-key", "key", "bearer-token", "basic-auth"}
    out: list[tuple[int, int, str]] = []
    for start, end, label in chosen:
        if label in generic:
            inner = [s for s in spans if s[3] not in generic and start <= s[0] and s[1] <= end
                     and (s[1] - s[0]) * 2 >= end - start]
            if inner:
                label = min(inner, key=lambda s: s[2])[3]
        out.append((start, end, label))
    return out


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """Replace each credential in ``text`` with ``[REDACTED:<label>]``.

    Args:
        text: any text.

    Returns:
        The redacted text and the labels found, first occurrence order, each once
        (empty when none).
    """
    labels: list[str] = []
    # Secrets written back to back hide each other behind the edge checks; once one is
    # replaced its neighbour stands free, so passes repeat until nothing more is found.
    for _ in range(4):
        found = find_secrets(text)
        if not found:
            break
        parts: list[str] = []
        pos = 0
        for start, end, label in found:
            parts.append(text[pos:start])
            parts.append(f"[REDACTED:{label}]")
            pos = end
        parts.append(text[pos:])
        text = "".join(parts)
        labels.extend(label for _, _, label in found)
    return text, list(dict.fromkeys(labels))


def redact_json(data: Any) -> str:
    """``data`` as JSON with every string in it redacted (the journal and sleep state).

    Strings are redacted where they stand, keys included, so the JSON stays valid and
    a secret that a ``json.dumps`` escape would split (a PEM's newlines) is still found.

    Args:
        data: a JSON-ready value (anything else is written as its ``str``).

    Returns:
        The JSON text (UTF-8 characters kept as they are).
    """
    return json.dumps(_redact_value(data), ensure_ascii=False)


def _redact_value(value: Any) -> Any:
    if isinstance(value, str):
        return redact_secrets(value)[0]
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, dict):
        return {_redact_value(str(k)): _redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return redact_secrets(str(value))[0]  # paths, timestamps…: as json.dumps(default=str)
