"""Sleep and report commands."""

from __future__ import annotations
