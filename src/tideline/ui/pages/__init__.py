"""The app's pages, one module per page; :func:`routes` gathers them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from tideline.ui.core import UI

__all__ = ["routes"]


def routes(ui: UI) -> list[BaseRoute]:
    """Every page's routes."""
    from tideline.ui.pages import (
        conflicts,
        conversations,
        dream,
        journal,
        map,
        memory,
        search,
    )

    out: list[BaseRoute] = []
    for module in (search, memory, conversations, journal, conflicts, dream, map):
        out += module.routes(ui)
    return out
