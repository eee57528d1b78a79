"""One rule for a tool's arguments: the catalogue's JSON Schema, read strictly.

Every surface that offers the catalogue's tools (:mod:`tideline.tools`) — the MCP
server (:mod:`tideline.mcp.arguments`) and the Hermes plugin — checks a call with
:func:`check_arguments`, and the checks are the facade's own validators
(:mod:`tideline.write.validate`), so a value means the same everywhere:

* an ``integer`` is a JSON integer — not ``"6"``, not ``6.0``, not ``true``;
* a ``number`` is a JSON number (an integer is one) — not ``"1"``, not ``true``;
* a ``boolean`` is ``true`` or ``false``; a ``string`` is any string, taken as text
  whatever it looks like (``"null"``, ``"42"``, ``'{"a": 1}'``);
* an ``array`` is a JSON array of such items, an ``object`` a JSON object;
* ``null`` stands for "absent" only where the parameter's default is absent.

Plain Python (no SDK, no store): a Hermes process checks arguments without loading more.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tideline.errors import InvalidInput
from tideline.tools import Tool
from tideline.write.validate import clean_flag, clean_int, clean_number

__all__ = ["check_arguments", "check_value"]

_WHAT = {"integer": "an integer", "number": "a number", "boolean": "true or false",
         "string": "text", "array": "a list", "object": "an object"}


def check_value(value: Any, schema: Mapping[str, Any], name: str) -> Any:
    """Check one value against a catalogue schema (type, enum, bounds, items, fields).

    Returns:
        The value, checked (a number as the facade reads it).

    Raises:
        InvalidInput: the value is not of the schema's JSON type or breaks a limit;
            the message names the argument (``limit must be an integer, got '5'``).
    """
    if "anyOf" in schema:
        for alt in schema["anyOf"]:
            try:
                return check_value(value, alt, name)
            except InvalidInput:
                continue
        kinds = " or ".join(_WHAT.get(str(a.get("type")), "valid") for a in schema["anyOf"])
        raise InvalidInput(f"{name} must be {kinds}")
    kind = schema.get("type")
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if kind == "integer":
        return clean_int(value, name, **({"lo": lo} if lo is not None else {}),
                         **({"hi": hi} if hi is not None else {}))
    if kind == "number":
        return clean_number(value, name, lo=-float("inf") if lo is None else lo,
                            hi=float("inf") if hi is None else hi)
    if kind == "boolean":
        return clean_flag(value, name)
    if kind == "string":
        if not isinstance(value, str):
            raise InvalidInput(f"{name} must be text")
        if "enum" in schema and value not in schema["enum"]:
            *head, last = map(repr, schema["enum"])
            raise InvalidInput(f"{name} must be one of {', '.join(head)} or {last}")
    elif kind == "array":
        if not isinstance(value, list):
            raise InvalidInput(f"{name} must be a list")
        for i, item in enumerate(value):
            check_value(item, schema.get("items", {}), f"{name}.{i}")
    elif kind == "object":
        if not isinstance(value, dict):
            raise InvalidInput(f"{name} must be an object")
        props: Mapping[str, Any] = schema.get("properties", {})
        for field in schema.get("required", ()):
            if value.get(field) is None:
                raise InvalidInput(f"{name}.{field} is required")
        for field, item in value.items():
            if field in props and item is not None:
                check_value(item, props[field], f"{name}.{field}")
    return value


def check_arguments(tool: Tool, arguments: Mapping[str, Any]) -> None:
    """Check a call's arguments against the tool's catalogue entry.

    Arguments the tool does not have are left alone (clients add their own); a
    required one that is missing or ``null`` is refused.

    Raises:
        InvalidInput: ``<tool>: <argument> must be …`` for the first that fails.
    """
    for param in tool.params:
        value = arguments.get(param.name)
        if value is None:
            if param.required:
                raise InvalidInput(f"{tool.name}: {param.name} is required")
            if param.name in arguments and param.default is not None:
                # null means "absent" only where absent is what the default says.
                raise InvalidInput(f"{tool.name}: {param.name} must be "
                                   f"{_WHAT.get(str(param.schema.get('type')), 'valid')}")
            continue
        try:
            check_value(value, param.schema, param.name)
        except InvalidInput as exc:
            raise InvalidInput(f"{tool.name}: {exc}") from None
