"""The layers' prompts: Markdown files in the package, filled with the day's data.

Each layer has one template, ``prompts/<layer>.md``, with ``{{placeholder}}``
slots. :func:`render_prompt` is what ``tideline dream --print-prompt`` prints
and what the MCP server offers as its DREAM prompts; the automated dream sends
the very same text to its provider.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

from tideline.dream.context import LayerContext, gather
from tideline.dream.errors import DreamError
from tideline.dream.schemas import schema_text
from tideline.dream.settings import LAYERS, DreamSettings

if TYPE_CHECKING:
    from tideline.runtime import Parts

__all__ = ["LAYERS", "fill", "placeholders", "render_prompt", "template"]

_SLOT = re.compile(r"\{\{([a-z_]+)\}\}")


def check_layer(layer: str) -> str:
    """The layer name, normalised.

    Raises:
        DreamError: not one of :data:`LAYERS`.
    """
    name = str(layer).strip().lower()
    if name not in LAYERS:
        raise DreamError(f"unknown layer {layer!r}; layers are {', '.join(LAYERS)}")
    return name


@lru_cache(maxsize=8)
def template(layer: str) -> str:
    """The raw Markdown template of a layer (package data).

    Raises:
        DreamError: unknown layer.
    """
    name = check_layer(layer)
    return resources.files("tideline.dream").joinpath("prompts", f"{name}.md").read_text(
        encoding="utf-8")


def placeholders(layer: str) -> set[str]:
    """The ``{{slots}}`` a layer's template has."""
    return set(_SLOT.findall(template(layer)))


def fill(layer: str, values: dict[str, str]) -> str:
    """Fill a template in one pass (data that contains ``{{…}}`` is never expanded again).

    Raises:
        DreamError: a slot has no value.
    """
    full = dict(values)
    full.setdefault("schema", schema_text(layer))
    missing = placeholders(layer) - set(full)
    if missing:
        raise DreamError(f"{layer} prompt lacks values for {', '.join(sorted(missing))}")
    return _SLOT.sub(lambda m: full[m.group(1)], template(layer))


def prompts_of(ctx: LayerContext) -> list[str]:
    """Every prompt of a gathered context (one per batch)."""
    return [fill(ctx.layer, values) for values in ctx.batches]


def render_prompt(mem: Parts, layer: str, *, scope: str | None = None,
                  settings: DreamSettings | None = None) -> str:
    """A layer's prompt, filled with the store's current data.

    When the layer has nothing to work on, the text says so in one line. When
    solidify has more raw conversation than fits one prompt, this is the first
    batch; apply its answer and ask again for the next.

    Args:
        mem: the memory (the facade, or its runtime).
        layer: ``solidify``, ``comb``, ``wander`` or ``dream``.
        scope: one project (with ``global``); default every scope.
        settings: bounds; default from the environment.

    Returns:
        The prompt text.

    Raises:
        DreamError: unknown layer.
    """
    name = check_layer(layer)
    ctx = gather(mem, name, settings or DreamSettings.load(), scope=scope)
    if ctx.empty or not ctx.batches:
        return f"Nothing to do for the {name} layer: {ctx.empty or 'no data'}."
    return fill(name, ctx.batches[0])
