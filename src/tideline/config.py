"""One typed settings object: every threshold, size cap and default in one place.

Values come from (lowest to highest precedence) the defaults below, the
``TIDELINE_*`` environment variables, and explicit keyword overrides (which the
CLI fills from its flags).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tideline.errors import InvalidInput

__all__ = ["Caps", "Config", "Dynamics", "RecallTuning", "SleepTuning", "default_home"]


def default_home() -> Path:
    """The store directory used when none is given: ``$TIDELINE_HOME`` or ``~/.tideline``."""
    env = os.environ.get("TIDELINE_HOME")
    return Path(env).expanduser() if env else Path.home() / ".tideline"


@dataclass(frozen=True)
class Caps:
    """Size caps on every field, batch and result."""

    gesture_chars: int = 16_000
    field_chars: int = 8_000
    tag_chars: int = 64
    tags: int = 64
    entities: int = 64
    source_links: int = 1_000
    turn_chars: int = 100_000
    name_chars: int = 200
    batch: int = 10_000
    # A streamed import (``tideline import jsonl``) reads, embeds and writes this many
    # turns per batch, each batch one transaction; a line of its file is at most
    # ``line_bytes`` long. The file itself has no length cap.
    import_batch: int = 500
    line_bytes: int = 4 * 1024 * 1024
    limit: int = 200
    query_chars: int = 4_000


@dataclass(frozen=True)
class RecallTuning:
    """Knobs of the recall path (fusion, graph spread, abstention)."""

    limit: int = 8
    candidates: int = 40
    keyword_boost: float = 0.3
    lexical_weight: float = 0.15
    graph_hops: int = 2
    graph_decay: float = 0.85
    graph_seeds: int = 5
    weight_share: float = 0.12
    retention_share: float = 0.2
    keyword_trust: float = 0.6
    # The full-text query ORs the rarest terms while their rows (document frequencies)
    # add up to at most posting_budget; the rarest term is always searched. Up to
    # conjunction_terms of the terms left out are searched together (AND), which finds
    # the rows holding all of them without ranking each one's long posting list. Every
    # term still counts, IDF-weighted, in the keyword evidence.
    posting_budget: int = 2_000
    conjunction_terms: int = 3
    # A query naming a calendar date ("on 22 June 2024", "im März 2024") adds when_boost
    # to the score of items from then (as much as a full keyword match) and brings in up
    # to when_turns raw turns spoken then or up to when_after_days later (people tell of
    # a day afterwards: "yesterday …").
    when_boost: float = 0.3
    when_after_days: float = 7.0
    when_turns: int = 400
    # An item from that window related to the query (cosine at least the floor) and
    # holding when_trust of its keywords (IDF-weighted) makes the packet trusted: the
    # date matched is evidence beside the words (0 disables).
    when_trust: float = 0.2
    # The turns next to the best neighbour_hits turn hits come in with neighbour_factor
    # of the hit's score (the reply to a question, the sentence after "guess what").
    neighbour_hits: int = 20
    neighbour_factor: float = 0.75
    # Hubness: a turn nearer than usual to its space's centroid (generic chat: "haha",
    # "ok!") has its similarity lowered by turn_hubness times the excess when ranking.
    turn_hubness: float = 0.5
    # A query naming some of a scope's speakers (or known_persons; short forms resolved:
    # "Mel" is Melanie) adds speaker_boost to the turns they spoke.
    speaker_boost: float = 0.05
    # A query naming people ranks turns by the query vector minus name_focus times each
    # named person's name vector (recall/focus.py): a question about Melanie's activities
    # ranks her turns by "activities", not by how much they resemble her name (0 disables).
    name_focus: float = 0.5
    # Query words widened to their other regular forms held in the index ("camped" also
    # finds "camping"; recall/morph.py), in the full-text search and the keyword evidence.
    word_forms: bool = True
    # A turn's relevance is lowered by question_discount times the share of its words
    # that sit in questions ("What got you into running?" asks; it tells nothing).
    question_discount: float = 0.3
    # ... but not a user's question to an assistant (a user-role turn in a session where an
    # assistant speaks): a request tells what its asker wants (recall/engine.py _asked).
    request_tells: bool = True
    # A turn's relevance is also lowered by listener_discount times the share of its
    # person pronouns that are second person (recall/listener.py): "Your group sounds
    # awesome!" speaks to the other person, "I joined a gym" tells a fact of its speaker
    # (0 disables; English pronouns).
    listener_discount: float = 0.15
    # A turn right after another speaker's question is lifted by answer_lift times that
    # question's share of words in questions (recall/answers.py): "What got you into
    # running?" is answered by a turn that tells a fact of its speaker (0 disables).
    answer_lift: float = 0.1
    # Each of the across_hits best turn hits passes across_question times its score to
    # its speaker's turn two places on (or back), when the turn between is another
    # speaker's question (recall/across.py): "I went camping." — "Where?" — "At the lake,
    # with the kids." (0 disables).
    across_question: float = 0.5
    across_hits: int = 3
    # Passage vectors (recall/sentences.py): with sentence_share > 0 an import also
    # embeds each passage of a turn of two or more (Passages below), and recall ranks a
    # turn by (1 - sentence_share) of its turn similarity plus sentence_share of its best
    # passage's: a "by the way" aside inside a long request is not diluted by the rest
    # (LongMemEval dev R@5 / R@10 / NDCG@10 +0.017 / +0.033 / +0.036 at 0.4;
    # docs/lab/recall-generalisation.md). Passages: consecutive sentences joined up to
    # passage_words words (0: single sentences); only user turns are split unless
    # passage_assistant (an assistant's long answers are many and rarely tell what the
    # user said or did).
    sentence_share: float = 0.4
    passage_words: int = 30
    passage_assistant: bool = False
    # ... and only in sessions where an assistant speaks (a user's request bundles the
    # ask with "by the way" asides the answer never echoes; in a chat between people each
    # turn is found by its context vector: forcing passages there cost LoCoMo dev 0.012
    # R@10 and 0.016 multi-hop R@10, docs/lab/recall-generalisation.md).
    passage_assisted: bool = True
    # Abstention (recall/trust.py): the best cosine that makes a packet trusted is read
    # from turns of which at most trust_question_share of the words sit in questions (a
    # turn that only asks, "Wow! What did you get?", sits near any question; 1 counts
    # every turn), less turn_hubness times the turn's hubness excess (when positive) if
    # trust_hubness is set: no turn vouches more than its raw cosine.
    trust_question_share: float = 0.5
    trust_hubness: bool = True
    # A query in the first person that does not speak to the assistant ("How long have
    # I been in my role?") lowers every assistant-role turn's score by this share: the
    # user's own turns tell it, the assistant's only echo it (recall/roles.py; 0
    # disables). A chat imported with role "user" for everyone is never touched.
    assistant_discount: float = 0.3
    # A question across time ("how many…", "how long…", "which … first") multiplies
    # every turn but its session's best by session_decay, so the best turns of several
    # sessions come first (recall/diversity.py; 1 disables).
    session_decay: float = 0.9
    # A turn lifted beside a hit (neighbour rule, carry across a question) never ends
    # above that hit, whatever the later rules multiply (recall/lifts.py). Off: the lift
    # itself never sets a neighbour above its hit, and on LoCoMo dev the later rules'
    # reorderings are what find the evidence (R@5 0.757 -> 0.734 with it; LongMemEval
    # dev unchanged when applied before the role rules, sR@5 0.942 -> 0.925 after them).
    keep_sources: bool = False
    # Turn-level knowledge updates (recall/restated.py): among the first ten turns, a
    # later turn of the same speaker in another session, holding update_coverage of the
    # query's keywords as the earlier one does, and scoring update_ratio of it, is put
    # just above it (0 disables).
    update_ratio: float = 0.95
    update_coverage: float = 0.6


@dataclass(frozen=True)
class Dynamics:
    """Trace dynamics: retention decays as ``exp(-ln2 · age / half_life)``."""

    episodic_half_life_days: float = 7.0
    semantic_half_life_days: float = 90.0
    stability_growth: float = 1.8
    max_half_life_days: float = 3650.0
    promote_after: int = 3
    dormant_below: float = 0.05
    dormant_rank_factor: float = 0.6
    """Recall score multiplier for a dormant memory (ranked lower, never dropped)."""
    use_reinforce: float = 0.25
    """Reinforcement a recall hit gives its memory at the next sleep (0 disables)."""
    use_spacing_days: float = 1.0
    """A recall hit reinforces only when this long has passed since the last access."""


@dataclass(frozen=True)
class SleepTuning:
    """Knobs of sleep: orchestration, plasticity, the script layer (see docs/sleep.md)."""

    # orchestration
    lock_wait_s: float = 120.0
    """How long a second sleep waits for the first one before it gives up (skips)."""
    lock_lease_s: float = 900.0
    """A sleep lock not renewed for this long is considered abandoned."""
    refresh_after_hours: float = 24.0
    """The gate opens after this long even when nothing changed (retention moves on)."""
    max_touch_share: float = 0.5
    """A step that would demote or prune more than this share of its rows stops and asks."""
    guard_min: int = 50
    """…unless it touches fewer rows than this (small stores are not blocked)."""
    rebuild_growth: float = 0.05
    """Clusters are rebuilt from scratch when the store grew by this share since the last
    build (else new memories are assigned incrementally)."""
    rebuild_after_hours: float = 24.0
    """…or when the last full build is older than this."""
    # plasticity (STDP-like commit of co-recall eligibility)
    stdp_rate: float = 0.6
    stdp_forward: float = 1.0
    """Earlier-ranked → later-ranked (and earlier recall → later recall) direction."""
    stdp_backward: float = 0.5
    """The reverse direction (weaker)."""
    stdp_rank_tau: float = 2.0
    stdp_pair_top: int = 8
    stdp_min_score: float = 0.05
    stdp_relative_min: float = 0.3
    """Only hits scoring at least this share of the recall's best take part."""
    stdp_window_s: float = 600.0
    """Recalls closer than this in time pair across recalls."""
    stdp_time_tau_s: float = 300.0
    stdp_cross_top: int = 3
    stdp_cross_rate: float = 0.8
    stdp_cross_recalls: int = 3
    """How many earlier recalls (inside the window) a recall pairs with."""
    reward_window_s: float = 3600.0
    """A reflect this soon after a recall modulates that recall's update."""
    reward_gain: float = 1.5
    edge_half_life_days: float = 45.0
    edge_prune_below: float = 0.02
    # topic clusters
    topic_generic_df: float = 0.2
    topic_min_occurrences: int = 3
    topic_min_size: int = 2
    topic_keywords_per_memory: int = 4
    topic_merge: bool = False
    topic_merge_jaccard: float = 0.5
    topic_exact_pos: bool = False
    """Tag CJK words with jieba.posseg's HMM (slow) instead of its dictionary tags."""
    # embedding soft clusters and routing
    cluster_memberships: int = 3
    cluster_sample: int = 30_000
    route_clusters: int = 2
    route_adjacent: int = 2
    route_members: int = 30
    route_factor: float = 0.7
    # attention
    attention_days: int = 30
    # entity graph
    entity_profile_min: int = 3
    # recurrence and weights
    recurrence_steps: tuple[int, ...] = (1, 3, 6, 11)
    """Other memories sharing a tag needed for recurrence 2, 3, 4, 5."""
    inflation_threshold: float = 0.7
    inflation_target: float = 0.6
    inflation_window: int = 50
    # unindexed context and backfill
    scan_gap_minutes: int = 30
    scan_max_turns: int = 400
    backfill_window_hours: float = 24.0
    backfill_links: int = 3
    backfill_candidates: int = 200


@dataclass(frozen=True)
class HttpTuning:
    """``tideline serve --http``: how many MCP sessions, for how long, under which names.

    Attributes:
        session_idle_s: a session with no request for this long ends
            (``$TIDELINE_HTTP_SESSION_IDLE_S``; the SDK's default was 30 minutes).
        sessions_per_client: sessions one client address holds at once; its next new
            session ends its least recently used one (``$TIDELINE_HTTP_SESSIONS_PER_CLIENT``).
        max_sessions: sessions in all; a new one beyond it ends the least recently used
            session of any client, so a new client is never refused
            (``$TIDELINE_HTTP_MAX_SESSIONS``).
        allowed_hosts: names besides the listening address that clients may put in
            ``Host``/``Origin`` (a DNS name or a proxy in front of the server;
            ``$TIDELINE_HTTP_ALLOWED_HOSTS``, comma-separated).
    """

    session_idle_s: float = 300.0
    sessions_per_client: int = 16
    max_sessions: int = 1000
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        idle = self.session_idle_s
        if isinstance(idle, bool) or not isinstance(idle, int | float) or not 0 < idle < 1e9:
            raise InvalidInput(f"http session_idle_s must be a positive number of seconds, "
                               f"got {idle!r}")
        for name in ("sessions_per_client", "max_sessions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"http {name} must be a whole number >= 1, got {value!r}")

    @classmethod
    def from_env(cls, env: Any) -> HttpTuning:
        """The defaults, overridden by ``$TIDELINE_HTTP_*``.

        Raises:
            InvalidInput: a value that is not a number.
        """
        values: dict[str, Any] = {}
        if env.get("TIDELINE_HTTP_SESSION_IDLE_S"):
            values["session_idle_s"] = _float(env["TIDELINE_HTTP_SESSION_IDLE_S"],
                                              "TIDELINE_HTTP_SESSION_IDLE_S")
        for name in ("sessions_per_client", "max_sessions"):
            var = f"TIDELINE_HTTP_{name.upper()}"
            if env.get(var):
                values[name] = _int(env[var], var)
        if env.get("TIDELINE_HTTP_ALLOWED_HOSTS"):
            values["allowed_hosts"] = tuple(
                h.strip() for h in env["TIDELINE_HTTP_ALLOWED_HOSTS"].split(",") if h.strip())
        return cls(**values)


@dataclass(frozen=True)
class Config:
    """Settings for one opened store.

    Attributes:
        home: the store directory.
        namespace: a fully separate memory inside the same store directory.
        embedder: ``e5`` (default), ``hashing``, ``http`` or ``none`` (full text only).
        busy_timeout_ms: SQLite busy timeout per attempt.
        busy_retries: bounded retries (with jitter) after the timeout.
        backups_keep: backups kept in ``<store>/backups`` (newest first, every kind of
            backup counted); 0 disables sleep's backup.
        backups_max_mb: and at most this many MiB of backups in total (0: no size
            bound); the newest backup is always kept, however large.
        write_retry_window_s: a write whose content matches an earlier one (same scope,
            kind, text and source) within this many seconds is a retry and replays the
            first outcome; later the same content is a restatement and goes through the
            novelty gate (it potentiates). An explicit idempotency key replays for good.
            ``$TIDELINE_WRITE_RETRY_WINDOW_S``.
        agent_name: whose memory this is, shown in the MCP tool descriptions, the
            session brief and the Hermes tools ("" names no one). The Tideline seed
            calls it ``AGENT_NAME``; here ``$TIDELINE_AGENT_NAME``.
        known_persons: people recall resolves names and short forms to, beside the
            speakers of stored turns (``TIDELINE_KNOWN_PERSONS``, comma-separated).
        database: a ``postgresql://`` URL to keep the memory in (``$TIDELINE_DATABASE_URL``);
            None keeps it in the SQLite file of ``home``. With a database, ``home`` is
            this host's local state (caches) only.
        database_pool_size: most connections one process keeps open to the PostgreSQL
            server (``$TIDELINE_DATABASE_POOL_SIZE``, default 4). One thread uses one
            connection at a time; raise it for a ``tideline serve --http`` host that
            answers many requests at once (each waits up to 10 s for a free connection,
            then retries). Unused on SQLite.
        database_read_url: where recall, the brief, ``read_context``, ``show`` and the
            report may read: a hot standby, or several (a libpq multi-host URL)
            (``$TIDELINE_DATABASE_READ_URL``). Writes, sleep and dream always go to the
            primary of ``database`` (see docs/postgres.md, high availability).
        database_read_wait_ms: how long such a read waits for the standby to replay
            this process's own newest write before it reads the primary instead
            (``$TIDELINE_DATABASE_READ_WAIT_MS``, default 500).
    """

    home: Path = field(default_factory=default_home)
    namespace: str = "default"
    embedder: str = "e5"
    embed_url: str | None = None
    embed_model: str | None = None
    busy_timeout_ms: int = 5_000
    busy_retries: int = 6
    backups_keep: int = 5
    backups_max_mb: int = 512
    write_retry_window_s: float = 600.0
    agent_name: str = ""
    embed_cooldown_s: float = 30.0
    """After an embedder failure, recall and writes skip it for this long (full text
    meanwhile), so a down endpoint costs one timeout per interval, not one per call."""
    known_persons: tuple[str, ...] = ()
    database: str | None = None
    database_pool_size: int = 4
    database_read_url: str | None = None
    database_read_wait_ms: int = 500
    caps: Caps = field(default_factory=Caps)
    recall: RecallTuning = field(default_factory=RecallTuning)
    dynamics: Dynamics = field(default_factory=Dynamics)
    sleep: SleepTuning = field(default_factory=SleepTuning)
    http: HttpTuning = field(default_factory=HttpTuning)

    @classmethod
    def load(cls, **overrides: Any) -> Config:
        """Build a config from defaults, ``TIDELINE_*`` env vars and overrides.

        Args:
            **overrides: field values that win over the environment; ``None`` is ignored.

        Returns:
            The config.

        Raises:
            InvalidInput: an unknown field or a value of the wrong type.
        """
        values: dict[str, Any] = {}
        env = os.environ
        if env.get("TIDELINE_NAMESPACE"):
            values["namespace"] = env["TIDELINE_NAMESPACE"]
        if env.get("TIDELINE_EMBEDDER"):
            values["embedder"] = env["TIDELINE_EMBEDDER"]
        if env.get("TIDELINE_EMBED_URL"):
            values["embed_url"] = env["TIDELINE_EMBED_URL"]
        if env.get("TIDELINE_EMBED_MODEL"):
            values["embed_model"] = env["TIDELINE_EMBED_MODEL"]
        for name in ("backups_keep", "backups_max_mb", "database_pool_size",
                     "database_read_wait_ms"):
            var = f"TIDELINE_{name.upper()}"
            if env.get(var):
                values[name] = _int(env[var], var)
        if env.get("TIDELINE_WRITE_RETRY_WINDOW_S"):
            values["write_retry_window_s"] = _float(env["TIDELINE_WRITE_RETRY_WINDOW_S"],
                                                    "TIDELINE_WRITE_RETRY_WINDOW_S")
        if env.get("TIDELINE_AGENT_NAME"):
            values["agent_name"] = env["TIDELINE_AGENT_NAME"]
        if env.get("TIDELINE_DATABASE_URL"):
            values["database"] = env["TIDELINE_DATABASE_URL"]
        if env.get("TIDELINE_DATABASE_READ_URL"):
            values["database_read_url"] = env["TIDELINE_DATABASE_READ_URL"]
        if env.get("TIDELINE_KNOWN_PERSONS"):
            values["known_persons"] = tuple(
                p.strip() for p in env["TIDELINE_KNOWN_PERSONS"].split(",") if p.strip())
        if any(k.startswith("TIDELINE_HTTP_") for k in env):
            values["http"] = HttpTuning.from_env(env)
        known = {f.name for f in dataclasses.fields(cls)}
        for key, value in overrides.items():
            if key not in known:
                raise InvalidInput(f"unknown setting {key!r}")
            if value is not None:
                values[key] = value
        if "home" in values:
            values["home"] = Path(values["home"]).expanduser()
        for name in ("backups_keep", "backups_max_mb"):
            if name in values and (isinstance(values[name], bool)
                                   or not isinstance(values[name], int) or values[name] < 0):
                raise InvalidInput(f"{name} must be a whole number >= 0, got {values[name]!r}")
        pool = values.get("database_pool_size", 4)
        if isinstance(pool, bool) or not isinstance(pool, int) or not 1 <= pool <= 1000:
            raise InvalidInput(f"database_pool_size must be a whole number from 1 to 1000, "
                               f"got {pool!r}")
        wait = values.get("database_read_wait_ms", 500)
        if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= 60_000:
            raise InvalidInput(f"database_read_wait_ms must be a whole number from 0 to "
                               f"60000, got {wait!r}")
        return cls(**values)

    def __post_init__(self) -> None:
        window = self.write_retry_window_s
        if isinstance(window, bool) or not isinstance(window, int | float) or not (
            float(window) >= 0.0
        ):
            raise InvalidInput(f"write_retry_window_s must be a number of seconds >= 0, "
                               f"got {window!r}")
        if not isinstance(self.agent_name, str):
            raise InvalidInput(f"agent_name must be text, got {self.agent_name!r}")
        name = " ".join(self.agent_name.split())
        if len(name) > 80 or any(not ch.isprintable() for ch in name):
            raise InvalidInput("agent_name must be at most 80 printable characters")
        # A name is shown to models in tool descriptions: one line, no surrounding space.
        object.__setattr__(self, "agent_name", name)


def _float(raw: str, name: str) -> float:
    try:
        return float(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be a number of seconds, got {raw!r}") from exc


def _int(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be an integer, got {raw!r}") from exc
