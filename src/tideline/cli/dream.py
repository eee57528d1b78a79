"""DREAM commands."""

from __future__ import annotations
