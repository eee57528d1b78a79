"""The tool catalogue: each agent-facing tool's name, description and parameters, once.

Two surfaces offer tools to a model: the MCP server (:mod:`tideline.mcp.server`, all
of them) and the Hermes plugin (:mod:`tideline.plugins.hermes`, ``tideline_recall``,
``tideline_memorize`` and ``tideline_reflect``). Both read their descriptions, limits
and defaults from here, so a model sees the same tool the same way on either (the
recall limit was 1–200 on one and 1–50 on the other). A parameter's ``schema`` is its
JSON Schema without description and default: the Hermes plugin publishes it as is; the
MCP server builds its pydantic signature from the same values, and a test checks that
the schema the SDK derives from that signature equals :meth:`Param.json_schema`.

This module is plain data (no pydantic, no store): a Hermes process lists its tools
without loading anything else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ID_MAX", "REQUIRED", "TOOLS", "TURN", "Param", "Tool"]

#: SQLite's INTEGER range (``tideline.write.validate.INT64_MAX``): the largest id.
ID_MAX = 2**63 - 1


class _Required:
    """The default of a parameter that has none (the caller must give it)."""

    def __repr__(self) -> str:
        return "REQUIRED"


#: Marks a parameter without a default.
REQUIRED: Any = _Required()


@dataclass(frozen=True)
class Param:
    """One tool parameter.

    Attributes:
        name: the argument name.
        description: what to pass, for the model.
        schema: its JSON Schema (type, limits, items, enum) without description and default.
        default: the value when omitted (:data:`REQUIRED`: none; ``None``: optional, no value).
    """

    name: str
    description: str
    schema: Mapping[str, Any]
    default: Any = REQUIRED

    @property
    def required(self) -> bool:
        """Whether the caller must give it."""
        return self.default is REQUIRED

    @property
    def minimum(self) -> Any:
        """The schema's ``minimum`` (None: unbounded)."""
        return self.schema.get("minimum")

    @property
    def maximum(self) -> Any:
        """The schema's ``maximum`` (None: unbounded)."""
        return self.schema.get("maximum")

    def json_schema(self) -> dict[str, Any]:
        """The parameter's JSON Schema: ``schema`` plus description and a non-null default."""
        out: dict[str, Any] = dict(self.schema)
        out["description"] = self.description
        if not self.required and self.default is not None:
            out["default"] = self.default
        return out


@dataclass(frozen=True)
class Tool:
    """One tool: its name, when to call it, and its parameters in signature order."""

    name: str
    description: str
    params: tuple[Param, ...]

    def param(self, name: str) -> Param:
        """One parameter by name.

        Raises:
            KeyError: the tool has no such parameter.
        """
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")

    def input_schema(self, names: Sequence[str] | None = None,
                     required: Sequence[str] | None = None) -> dict[str, Any]:
        """A JSON Schema object over some parameters (default: all).

        Args:
            names: the parameters to offer, in this order.
            required: the ones the caller must give (default: those without a default).

        Raises:
            KeyError: a name the tool does not have.
        """
        chosen = [self.param(n) for n in names] if names is not None else list(self.params)
        must = list(required) if required is not None else [p.name for p in chosen
                                                             if p.required]
        return {"type": "object", "properties": {p.name: p.json_schema() for p in chosen},
                "required": must}


def _text() -> dict[str, Any]:
    return {"type": "string"}


def _int(lo: int, hi: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def _number(lo: float, hi: float) -> dict[str, Any]:
    return {"type": "number", "minimum": lo, "maximum": hi}


def _flag() -> dict[str, Any]:
    return {"type": "boolean"}


def _list(items: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": dict(items)}


def _one_of(*values: str) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


_ID = _int(1, ID_MAX)
_VERSION = _int(0, ID_MAX)
_WEIGHT = _int(1, 5)

#: A raw turn inside ``memorize``'s ``turns`` (the MCP server's ``TurnIn`` model).
TURN: dict[str, Any] = {
    "type": "object",
    "description": "A raw conversation turn to store verbatim (texture).",
    "properties": {
        "role": {**_one_of("user", "assistant", "system", "tool"), "default": "user",
                 "description": "Who spoke."},
        "text": {**_text(), "description": "What was said, verbatim."},
        "speaker": {**_text(), "description": "A name for the speaker (default: the role)."},
        "timestamp": {"anyOf": [_text(), {"type": "number"}],
                      "description": "When it was said (ISO 8601 or epoch seconds)."},
        "id": {**_text(), "description": "The source's message id (makes retries no-ops)."},
    },
    "required": ["text"],
}


def _project() -> Param:
    return Param("project", "Project scope to use (default: the detected project; 'global' "
                 "for none). Recall always sees this project plus 'global', never another "
                 "project.", _text(), default=None)


def _version() -> Param:
    return Param("expected_version", "The version you read (from the read tool); the write "
                 "fails with `conflict` if it changed meanwhile. Omit to overwrite.",
                 _VERSION, default=None)


_CATALOGUE = (
    Tool("recall", (
        "Recall what you know. Call BEFORE answering or acting whenever the task may depend "
        "on earlier sessions: the user's preferences, project decisions and their reasons, "
        "names, error codes, fixes, open questions. Returns memories and raw conversation "
        "turns (best first, with confidence, source and source_links), or abstains when "
        "nothing is trustworthy — then say you don't know rather than guess."), (
        Param("query", "What you need, in any language.", _text()),
        _project(),
        Param("limit", "Maximum items (1–200).", _int(1, 200), default=8),
        Param("kind", "Only memories of this kind (fact, decision, preference, episode, …).",
              _text(), default=None),
        Param("since", "Only from this time (ISO).", _text(), default=None),
        Param("until", "Only up to this time (ISO).", _text(), default=None),
        Param("include_turns", "Also return raw turns.", _flag(), default=True),
    )),
    Tool("memorize", (
        "Store something worth keeping. Call AFTER a decision (with its reason), a learned "
        "fact, a stated preference, a fix, or an open question — one item per call. "
        "Near-duplicates are merged automatically (novelty gate)."), (
        Param("text", "Free text to remember.", _text(), default=None),
        Param("gesture", "Instead of `text`, a structured narrative: what happened, one "
              "sentence with tone (with `context`, `cognition_direction` and the 1–5 "
              "weights).", _text(), default=None),
        Param("context", "Structured: the setting.", _text(), default=""),
        Param("cognition_direction", "Structured: where thinking went.", _text(), default=""),
        Param("kind", "fact, episode, preference, decision, narrative, reflection, "
              "procedure, identity (default: fact for text, narrative for gesture).",
              _text(), default=None),
        Param("scope", "Omit for the current project; 'global' for what holds everywhere "
              "(the user, yourself); or a project name.", _text(), default=None),
        Param("tags", "Labels.", _list(_text()), default=None),
        Param("entities_role", "Who did what, e.g. 'A=decided; B=reviewed'.", _text(),
              default=""),
        Param("related_entities", "Names involved.", _list(_text()), default=None),
        Param("source_links", "Raw turn ids this memory came from.", _list(_ID),
              default=None),
        Param("importance", "1–5: how much this matters (5 = essential; weights the session "
              "brief).", _WEIGHT, default=3),
        Param("emotional", "1–5: emotional intensity.", _WEIGHT, default=1),
        Param("recurrence", "1–5: how often it comes up.", _WEIGHT, default=1),
        Param("unresolved", "1–5: how open it still is (5 = an unresolved question).",
              _WEIGHT, default=1),
        Param("event_time", "When it happened (ISO), if not now.", _text(), default=None),
        Param("idempotency_key", "Makes a retried call a no-op, its `turns` included.",
              _text(), default=None),
        Param("turns", "Raw conversation turns to store verbatim (linked to the memory as "
              "its source_links).", _list(TURN), default=None),
        Param("session", "Session id for `turns` (default: 'mcp').", _text(), default=None),
    )),
    Tool("reflect", (
        "Give feedback on recalled memories. Call after you used (or rejected) what recall "
        "returned: reward > 0 reinforces memories that helped, reward < 0 weakens wrong or "
        "useless ones. This is how memory learns what matters."), (
        Param("ids", "Memory ids from recall.", _list(_ID)),
        Param("reward", "-1..1: > 0 reinforces memories that helped, < 0 weakens wrong ones.",
              _number(-1, 1), default=1.0),
        _project(),
    )),
    Tool("revise", (
        "Correct a memory. Call when a stored memory is outdated or wrong: writes a new "
        "version that supersedes it (the old one stays in its history)."), (
        Param("memory_id", "The memory to correct.", _ID),
        Param("text", "The corrected text (gesture).", _text(), default=None),
        Param("context", "New setting.", _text(), default=None),
        Param("cognition_direction", "New direction.", _text(), default=None),
        Param("kind", "New kind.", _text(), default=None),
        Param("tags", "New tags.", _list(_text()), default=None),
        Param("importance", "New importance 1–5.", _WEIGHT, default=None),
        _project(),
    )),
    Tool("forget", (
        "Delete a memory for real. Call ONLY when the user asks to forget something or it "
        "must not be kept (privacy). To correct a memory use `revise` instead."), (
        Param("memory_id", "The memory to delete.", _ID),
        _project(),
    )),
    Tool("read_context", (
        "Read the raw conversation behind memories. Call when a recalled memory is too terse "
        "and you need the exact words: `memory_id` follows its source_links to the raw turns "
        "(with `radius` turns around each); `query` searches the raw transcript history by "
        "words and meaning; `session` shows a window of one session (around turn `around`, "
        "or its end)."), (
        Param("memory_id", "Follow this memory's source_links.", _ID, default=None),
        Param("query", "Search raw turns.", _text(), default=None),
        Param("session", "Show this session.", _text(), default=None),
        Param("around", "Turn index to centre the session window on (default: its end).",
              _int(0, ID_MAX), default=None),
        Param("radius", "Turns shown before and after each linked turn (0–50).", _int(0, 50),
              default=3),
        Param("limit", "Maximum items (1–200).", _int(1, 200), default=20),
        _project(),
    )),
    Tool("introspect", (
        "Show the state of memory: counts by kind/scope/status, raw turns and sessions, the "
        "detected project and which rule chose it, the embedder and its thresholds, the "
        "injection settings. Call when unsure which project you are in or whether memory "
        "holds anything."), ()),
    Tool("dream_log", (
        "Read the journal (newest first): writes with the novelty gate's decision, recalls "
        "with latency and abstention, feedback, sleeps, dreams, hook errors. Call to review "
        "what memory did recently or to debug it."), (
        Param("kinds", "Only these event kinds (write, recall, sleep, dream, hook_error, …).",
              _list(_text()), default=None),
        Param("limit", "Maximum events (1–1000).", _int(1, 1000), default=50),
    )),
    Tool("attention_heatmap", (
        "Show where recall's attention goes: clusters (or tags) that light up again and "
        "again versus deserts never recalled — potential blind spots. Call when reflecting "
        "on your memory (e.g. during a DREAM comb) or planning what to revisit."), (
        Param("days", "Look back this many days, 0–3650 (default 30; null = all time).",
              _number(0, 3650), default=30.0),
        _project(),
    )),
    Tool("brief", (
        "Orient yourself at the start of a task (clients without Tideline hooks): returns "
        "the identity anchor, the high-weight memories, the last session's raw texture and "
        "the memory map, within a token budget."), (
        _project(),
        Param("budget", "Token budget (default 2000).", _int(100, 50_000), default=None),
    )),
    Tool("read_profiles", (
        "Read what memory holds about people and other entities (facets: fact, impression, "
        "relationship). Call before working with or for someone named."), (
        Param("entity", "One entity (default: all).", _text(), default=None),
    )),
    Tool("update_profile", (
        "Create or replace one facet of an entity's profile (fact, impression or "
        "relationship). Call when you learn something lasting about a person or system. "
        "Pass expected_version from read_profiles to avoid overwriting a concurrent edit."), (
        Param("entity", "Who or what.", _text()),
        Param("facet", "Which facet: fact, impression or relationship.",
              _one_of("fact", "impression", "relationship")),
        Param("content", "The whole new facet text.", _text()),
        _version(),
    )),
    Tool("read_self_concept", (
        "Read your self-concept (facets: fact, terrain, reflection) — who you are in this "
        "memory. Call when reflecting on yourself or your working style."), ()),
    Tool("update_self_concept", (
        "Create or replace one self-concept facet (fact, terrain or reflection). Call when a "
        "lasting insight about yourself emerges (e.g. after a DREAM comb)."), (
        Param("facet", "Which facet: fact, terrain or reflection.",
              _one_of("fact", "terrain", "reflection")),
        Param("content", "The whole new facet text.", _text()),
        _version(),
    )),
    Tool("apply_dream", (
        "Write back your answer to a DREAM prompt (solidify, comb, wander or dream) that "
        "you fetched from this server's prompts. Call after you answered the prompt "
        "yourself: the JSON answer is validated like a provider's (schema, ids, versions) "
        "and applied in one transaction; invalid answers change nothing. Use dry_run to "
        "see the diff first."), (
        Param("layer", "The DREAM layer whose prompt you answered.",
              _one_of("solidify", "comb", "wander", "dream")),
        Param("answer", "Your JSON answer, exactly as the prompt asks for it.", _text()),
        _project(),
        Param("dry_run", "Show the changes; apply nothing.", _flag(), default=False),
    )),
)

#: Every tool by name, in the order the MCP server lists them.
TOOLS: dict[str, Tool] = {t.name: t for t in _CATALOGUE}
