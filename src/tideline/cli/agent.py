"""Agent-integration commands: serve, hook, install/uninstall, import."""

from __future__ import annotations
