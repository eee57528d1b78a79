"""Output schemas of the MCP tools: what each tool's structured content holds.

Each model names the fields a client can rely on; further fields are allowed
(``extra="allow"``), so the schema documents the contract without freezing every
key of, say, ``introspect``. The SDK publishes them as ``outputSchema`` and checks
every successful result against its model; an error result carries
``{"error": {"code", "message", "jsonrpc_code"}}`` instead (:mod:`.errors`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = [
    "ApplyDreamOut", "AttentionOut", "BriefOut", "DreamLogOut", "ForgetOut", "IntrospectOut",
    "MemorizeOut", "ProfileOut", "ProfilesOut", "ReadContextOut", "RecallOut", "ReflectOut",
    "ReviseOut", "SelfConceptOut",
]


_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Present instead of the fields above when isError is true.",
    "properties": {
        "code": {"type": "string", "description": "The stable code, e.g. invalid_input."},
        "message": {"type": "string", "description": "What was wrong, in the tool's terms."},
        "jsonrpc_code": {"type": "integer", "description": "The JSON-RPC error number."},
    },
    "required": ["code", "message"],
}


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler,
    ) -> JsonSchemaValue:
        # Clients check structuredContent against outputSchema even on an error result
        # (the TypeScript SDK does), so the schema admits the error shape as one branch.
        schema = handler.resolve_ref_schema(handler(core_schema))
        required = schema.pop("required", [])
        schema.setdefault("properties", {})["error"] = _ERROR_SCHEMA
        schema["anyOf"] = [{"required": required}, {"required": ["error"]}]
        return schema


class RecallOut(_Out):
    """A recall packet."""

    query: str = Field(description="The query as searched (normalised).")
    scope: str = Field(description="The project searched (with 'global').")
    abstained: bool = Field(description="True when nothing is trustworthy: say you don't know.")
    items: list[dict[str, Any]] = Field(description="Memories and raw turns, best first, each "
                                        "with id, type, text, confidence, source, scope.")


class MemorizeOut(_Out):
    """What memorize stored."""

    memory: dict[str, Any] | None = Field(None, description="The novelty gate's decision "
                                          "(new, potentiate, link, correct), the id, the scope "
                                          "and the edge it added (a correct one updates "
                                          "the nearest memory).")
    turns: dict[str, Any] | None = Field(None, description="Raw turns inserted and skipped.")


class ReflectOut(_Out):
    """The feedback applied."""

    updated: list[int] = Field(description="Memory ids reinforced or weakened.")
    missing: list[int] = Field(description="Ids that name no memory.")
    reward: float = Field(description="The reward applied, -1..1.")


class ReviseOut(_Out):
    """The new version."""

    id: int = Field(description="The new memory's id.")
    supersedes: int = Field(description="The id it replaces (kept in its history).")


class ForgetOut(_Out):
    """The deletion."""

    forgotten: int = Field(description="The id deleted.")
    scope: str = Field(description="The scope it was in.")


class ReadContextOut(_Out):
    """Raw turns behind memories."""

    mode: str = Field(description="memory, query or session.")
    turns: list[dict[str, Any]] = Field(description="The raw turns (or windows of them).")


class IntrospectOut(_Out):
    """The state of memory."""

    memories: int = Field(description="How many memories the namespace holds.")
    turns: int = Field(description="How many raw turns it holds.")
    project: str | None = Field(description="The detected project, or null.")


class DreamLogOut(_Out):
    """Journal entries."""

    events: list[dict[str, Any]] = Field(description="Newest first: id, ts, kind, memory_id, "
                                         "data.")


class AttentionOut(_Out):
    """Where recall's attention went: clusters, or tags under ``by_tag`` before clusters exist."""


class BriefOut(_Out):
    """The session brief."""

    text: str = Field(description="The fenced brief (empty when memory is empty).")
    tier_tokens: dict[str, int] = Field(description="Tokens used per tier.")


class ProfilesOut(_Out):
    """Profile facets."""

    profiles: list[dict[str, Any]] = Field(description="entity, facet, content, version.")


class ProfileOut(_Out):
    """One facet after the update."""

    facet: str = Field(description="The facet written.")
    content: str = Field(description="Its whole new text.")
    version: int = Field(description="Its version now (pass it as expected_version next).")


class SelfConceptOut(_Out):
    """Self-concept facets."""

    self_concept: list[dict[str, Any]] = Field(description="facet, content, version.")


class ApplyDreamOut(_Out):
    """The applied (or, with dry_run, planned) layer."""

    layer: str = Field(description="solidify, comb, wander or dream.")
    status: str = Field(description="What happened to the layer (applied, dry_run, …).")
