"""Injection tiers T0–T4 and importers (agent integration)."""
