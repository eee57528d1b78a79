"""The JSON each layer must answer with, and the checks that hold it to that.

Each layer has one JSON Schema (a small, portable subset: ``type``,
``properties``, ``required``, ``additionalProperties``, ``items``,
``minItems``/``maxItems``, ``minLength``/``maxLength``, ``minimum``/``maximum``,
``enum``). The same schema is printed into the prompt, sent to endpoints that
support structured output, and enforced here, so that nothing depends on a
provider honouring it. Checks that need the store (do the ids exist? were the
turns shown?) live in :mod:`tideline.dream.plan`.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MEMORY_KINDS", "SCHEMAS", "parse_answer", "schema_text", "validate"]

# A dream never solidifies into a dream or a reflection: those kinds belong to the later layers.
MEMORY_KINDS = ["fact", "episode", "preference", "decision", "narrative", "procedure", "identity"]


def _text(max_length: int, min_length: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", "maxLength": max_length}
    if min_length:
        out["minLength"] = min_length
    return out


def _ids(min_items: int = 0, max_items: int = 200) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "array", "items": {"type": "integer", "minimum": 1},
                           "maxItems": max_items}
    if min_items:
        out["minItems"] = min_items
    return out


def _words(max_items: int, max_length: int = 64) -> dict[str, Any]:
    return {"type": "array", "items": _text(max_length, 1), "maxItems": max_items}


_WEIGHT = {"type": "integer", "minimum": 1, "maximum": 5}
_VERSION = {"type": "integer", "minimum": 1}

_SOLIDIFY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["memories"],
    "properties": {
        "memories": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["gesture", "kind", "source_links", "importance", "emotional",
                             "recurrence", "unresolved"],
                "properties": {
                    "gesture": _text(1000, 1),
                    "context": _text(2000),
                    "cognition_direction": _text(2000),
                    "kind": {"type": "string", "enum": MEMORY_KINDS},
                    "tags": _words(12),
                    "entities_role": _text(500),
                    "related_entities": _words(20, 200),
                    "source_links": _ids(1),
                    "importance": _WEIGHT,
                    "emotional": _WEIGHT,
                    "recurrence": _WEIGHT,
                    "unresolved": _WEIGHT,
                    "event_time": {"type": ["string", "null"], "maxLength": 40},
                },
            },
        },
        "backfill": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["memory_id", "source_links"],
                "properties": {"memory_id": {"type": "integer", "minimum": 1},
                               "version": _VERSION, "source_links": _ids(1)},
            },
        },
        "skipped": {
            "type": "array",
            "maxItems": 100,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["source_links", "reason"],
                "properties": {"source_links": _ids(1), "reason": _text(300)},
            },
        },
    },
}

_COMB: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["weights", "conflicts", "profiles", "self_concept", "threads"],
    "properties": {
        "weights": {
            "type": "array",
            "maxItems": 100,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["memory_id", "reason"],
                "properties": {
                    "memory_id": {"type": "integer", "minimum": 1},
                    "version": _VERSION,
                    "importance": _WEIGHT,
                    "emotional": _WEIGHT,
                    "recurrence": _WEIGHT,
                    "unresolved": _WEIGHT,
                    "reason": _text(300),
                },
            },
        },
        "conflicts": {
            "type": "array",
            "maxItems": 30,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["memory_id", "other_id", "relation", "reason"],
                "properties": {
                    "memory_id": {"type": "integer", "minimum": 1},
                    "other_id": {"type": "integer", "minimum": 1},
                    "relation": {"type": "string", "enum": ["contradicts", "supersedes"]},
                    "reason": _text(500, 1),
                },
            },
        },
        "profiles": {
            "type": "array",
            "maxItems": 30,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["entity", "facet", "content"],
                "properties": {
                    "entity": _text(200, 1),
                    "facet": {"type": "string", "enum": ["fact", "impression", "relationship"]},
                    "content": _text(4000, 1),
                    "version": {"type": "integer", "minimum": 0},
                },
            },
        },
        "self_concept": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["facet", "content"],
                "properties": {
                    "facet": {"type": "string", "enum": ["fact", "terrain", "reflection"]},
                    "content": _text(4000, 1),
                    "version": {"type": "integer", "minimum": 0},
                },
            },
        },
        "threads": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["title", "source_memories"],
                "properties": {
                    "title": _text(200, 1),
                    "body": _text(2000),
                    "source_memories": _ids(1, 50),
                },
            },
        },
    },
}

_REFLECTION: dict[str, Any] = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": ["gesture", "importance", "emotional", "recurrence", "unresolved"],
    "properties": {
        "gesture": _text(1000, 1),
        "context": _text(2000),
        "cognition_direction": _text(2000),
        "tags": _words(12),
        "importance": _WEIGHT,
        "emotional": _WEIGHT,
        "recurrence": _WEIGHT,
        "unresolved": _WEIGHT,
    },
}

_WANDER: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["found"],
    "properties": {
        "found": {"type": "boolean"},
        "connections": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["from_id", "to_id", "insight", "strength"],
                "properties": {
                    "from_id": {"type": "integer", "minimum": 1},
                    "to_id": {"type": "integer", "minimum": 1},
                    "insight": _text(1000, 1),
                    "strength": {"type": "number", "minimum": 0, "maximum": 1},
                },
            },
        },
        "reflection": _REFLECTION,
        "note": _text(1000),
    },
}

_DREAM: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["symbols", "story", "reflection", "emotional", "recurrence", "unresolved"],
    "properties": {
        "symbols": {
            "type": "array",
            "minItems": 3,
            "maxItems": 5,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["symbol", "memory_ids"],
                "properties": {"symbol": _text(100, 1), "memory_ids": _ids(1, 10)},
            },
        },
        "story": _text(4000, 1),
        "reflection": _text(2000, 1),
        "importance": _WEIGHT,
        "emotional": _WEIGHT,
        "recurrence": _WEIGHT,
        "unresolved": _WEIGHT,
        "tags": _words(8),
    },
}

#: Each layer's answer schema (JSON Schema), by layer name.
SCHEMAS: dict[str, dict[str, Any]] = {
    "solidify": _SOLIDIFY, "comb": _COMB, "wander": _WANDER, "dream": _DREAM,
}


def schema_text(layer: str) -> str:
    """The layer's schema as compact, stable JSON for the prompt."""
    return json.dumps(SCHEMAS[layer], ensure_ascii=False, indent=1, sort_keys=False)


_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    and math.isfinite(v),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def validate(value: Any, schema: dict[str, Any], path: str = "$",
             limit: int = 20) -> list[str]:
    """Check ``value`` against ``schema``; returns problems as ``path: what`` lines.

    Args:
        value: the parsed JSON.
        schema: a schema in the subset described in the module docstring.
        path: the JSON path of ``value`` (for messages).
        limit: stop after this many problems.
    """
    problems: list[str] = []
    _check(value, schema, path, problems, limit)
    return problems[:limit]


def _check(value: Any, schema: dict[str, Any], path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if not any(_TYPES[t](value) for t in allowed):
            out.append(f"{path}: expected {' or '.join(allowed)}, got {_type_name(value)}")
            return
    if value is None:
        return
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: {value} is above the maximum {schema['maximum']}")
    if isinstance(value, str):
        if len(value.strip()) < schema.get("minLength", 0):
            out.append(f"{path}: must not be empty")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{path}: longer than {schema['maxLength']} characters")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            out.append(f"{path}: needs at least {schema['minItems']} item(s), got {len(value)}")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(f"{path}: at most {schema['maxItems']} item(s), got {len(value)}")
        item_schema = schema.get("items")
        if item_schema is not None:
            for i, item in enumerate(value):
                _check(item, item_schema, f"{path}[{i}]", out, limit)
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        out.extend(f"{path}: missing required field {key!r}"
                   for key in schema.get("required", []) if key not in value)
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(props))
            if extra:
                out.append(f"{path}: unknown field(s) {', '.join(map(repr, extra))}")
        for key, sub in props.items():
            if key in value:
                _check(value[key], sub, f"{path}.{key}", out, limit)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "integer",
            float: "number"}.get(type(value), type(value).__name__)


_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


def parse_answer(text: str, *, truncated: bool = False) -> tuple[Any, list[str]]:
    """Parse a model's answer into JSON.

    A Markdown code fence around the object, or a sentence before or after it,
    is tolerated; anything else is a problem.

    Args:
        text: the answer as returned.
        truncated: the provider reported that the answer hit its length limit.

    Returns:
        ``(value, [])`` or ``(None, problems)``.
    """
    if truncated:
        return None, ["the answer was cut off at the token limit (truncated); answer more "
                      "briefly"]
    body = text.strip()
    if not body:
        return None, ["the answer was empty"]
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        return json.loads(body), []
    except json.JSONDecodeError as exc:
        first_error = exc
    start = body.find("{")
    if start >= 0:
        try:
            value, _end = json.JSONDecoder().raw_decode(body[start:])
            return value, []
        except json.JSONDecodeError as exc:
            first_error = exc
    cut = first_error.msg.startswith("Unterminated") or first_error.pos >= len(body) - 1
    hint = " (the answer looks truncated)" if cut else ""
    return None, [f"not valid JSON: {first_error.msg} at line {first_error.lineno} column "
                  f"{first_error.colno}{hint}"]
