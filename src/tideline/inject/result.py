"""What an injection returns, and how tiers share one token budget.

Each tier is built as lines (plus structured items); :func:`assemble` gives
every tier a share of the budget, hands what one tier leaves unused to the
ones that need more, clips to whole lines, and wraps everything in one fence
labelled as recalled data (see :func:`tideline.render.fence`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tideline.inject.budget import clip_lines, estimate_tokens
from tideline.render import fence

__all__ = ["InjectResult", "TierBlock", "assemble"]

TIER_TITLES = {
    "T0": "identity anchor",
    "T1": "session bridge",
    "T2": "prefetch cache (high-weight)",
    "T2b": "context bridge (last day's texture)",
    "T3": "memory map",
    "T4": "active retrieval",
}


@dataclass(frozen=True)
class TierBlock:
    """One tier's contribution.

    Attributes:
        tier: ``T0``, ``T1``, ``T2``, ``T2b``, ``T3`` or ``T4``.
        lines: the rendered lines (before budget clipping).
        items: structured data for each line (ids, scores, provenance).
        note: why the tier looks the way it does (fallback used, skipped, …).
        tokens: estimated tokens actually injected (after clipping).
        clipped: True when the budget cut lines off.
    """

    tier: str
    lines: tuple[str, ...] = ()
    items: tuple[dict[str, Any], ...] = ()
    note: str = ""
    tokens: int = 0
    clipped: bool = False

    @property
    def title(self) -> str:
        """Human title of the tier."""
        return TIER_TITLES.get(self.tier, self.tier)

    def header(self) -> str:
        """The section header inside the fence."""
        note = f" ({self.note})" if self.note else ""
        return f"## {self.tier} · {self.title}{note}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"tier": self.tier, "title": self.title, "note": self.note, "tokens": self.tokens,
                "clipped": self.clipped, "lines": list(self.lines), "items": list(self.items)}


@dataclass(frozen=True)
class InjectResult:
    """An injection block and how it was built.

    Attributes:
        kind: ``brief`` (session start: T0/T2/T2b/T3) or ``prefetch`` (per prompt: T1/T4).
        text: the fenced block to put into the prompt ('' when there is nothing to say).
        tiers: every tier that was considered, with its token count.
        tokens: estimated tokens of ``text``.
        budget: the token budget it had to fit.
        project: the project scope used.
        rule: the project-detection rule that fired.
    """

    kind: str
    text: str
    tiers: tuple[TierBlock, ...]
    tokens: int
    budget: int
    project: str | None = None
    rule: str = ""
    session: str | None = None
    query: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tier_tokens(self) -> dict[str, int]:
        """Tokens per tier."""
        return {t.tier: t.tokens for t in self.tiers}

    def tier(self, name: str) -> TierBlock | None:
        """The block of one tier, if it was considered."""
        return next((t for t in self.tiers if t.tier == name), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"kind": self.kind, "text": self.text, "tokens": self.tokens,
                "budget": self.budget, "tier_tokens": self.tier_tokens,
                "tiers": [t.to_dict() for t in self.tiers], "project": self.project,
                "rule": self.rule, "session": self.session, "query": self.query,
                **self.extra}


def assemble(kind: str, blocks: Sequence[TierBlock], budget: int, shares: Mapping[str, float],
             attrs: Mapping[str, Any]) -> tuple[str, tuple[TierBlock, ...]]:
    """Fit the tiers into ``budget`` tokens and fence them.

    Each tier first gets ``shares[tier] · budget``; what a tier does not use goes,
    in tier order, to the tiers that were cut. Lines are kept whole where possible.

    Returns:
        The fenced text ('' when no tier has lines) and the blocks with token counts.
    """
    live = [b for b in blocks if b.lines]
    if not live or budget <= 0:
        return "", tuple(dataclasses.replace(b, tokens=0, clipped=bool(b.lines)) for b in blocks)
    label = f"tideline {kind}"
    overhead = estimate_tokens(fence(label, "", **attrs)) + 2
    avail = max(0, budget - overhead)
    need = {b.tier: sum(estimate_tokens(x) + 1 for x in (b.header(), *b.lines)) for b in live}
    total_share = sum(shares.get(b.tier, 0.0) for b in live) or 1.0
    grant = {b.tier: min(need[b.tier], int(avail * shares.get(b.tier, 0.0) / total_share))
             for b in live}
    left = avail - sum(grant.values())
    for b in live:
        extra = min(need[b.tier] - grant[b.tier], max(0, left))
        grant[b.tier] += extra
        left -= extra
    parts: list[str] = []
    out: dict[str, TierBlock] = {}
    for b in live:
        header_cost = estimate_tokens(b.header()) + 1
        kept, clipped = clip_lines(list(b.lines), grant[b.tier] - header_cost)
        if not kept:
            out[b.tier] = dataclasses.replace(b, tokens=0, clipped=True)
            continue
        section = "\n".join([b.header(), *kept])
        parts.append(section)
        out[b.tier] = dataclasses.replace(b, tokens=estimate_tokens(section) + 1,
                                          clipped=clipped)
    if not parts:
        return "", tuple(out.get(b.tier, dataclasses.replace(b, tokens=0)) for b in blocks)
    text = fence(label, "\n\n".join(parts), **attrs)
    while estimate_tokens(text) > budget and parts:
        # The estimate of the whole can exceed the sum of the parts by rounding; trim the tail.
        last = parts[-1].rsplit("\n", 1)
        parts[-1:] = [last[0]] if len(last) == 2 and last[0] else []
        text = fence(label, "\n\n".join(parts), **attrs) if parts else ""
    return text, tuple(out.get(b.tier, dataclasses.replace(b, tokens=0)) for b in blocks)
