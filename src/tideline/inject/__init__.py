"""Injection tiers T0–T4: what goes into an agent's prompt, within a token budget.

The facade verbs are :meth:`tideline.Memory.inject_brief` (T0/T2/T2b/T3, no embedding)
and :meth:`tideline.Memory.inject_prefetch` (T1/T4 for one prompt); see
``docs/agents.md``. Everything here imports without numpy, for fast hooks.
"""

from __future__ import annotations

from tideline.inject.budget import estimate_tokens
from tideline.inject.result import InjectResult, TierBlock
from tideline.inject.tuning import InjectTuning

__all__ = ["InjectResult", "InjectTuning", "TierBlock", "estimate_tokens"]
