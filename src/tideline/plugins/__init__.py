"""Plugins for agent runtimes that load memory providers (Hermes Agent)."""

from __future__ import annotations

__all__: list[str] = []
