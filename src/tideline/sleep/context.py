"""What every sleep step receives: the runtime, the sleep-side store, the settings and the time."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tideline.config import Dynamics, SleepTuning
from tideline.store.consolidation import ConsolidationStore

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["SleepContext", "guard"]


@dataclass
class SleepContext:
    """The state one sleep run shares between its steps.

    Attributes:
        rt: the memory's parts (store, embedder and its guard, settings).
        cons: the sleep-side SQL.
        tuning: sleep settings.
        dyn: trace-dynamics settings.
        now: the time the run treats as "now" (epoch seconds).
        force: run even when a guard would stop a step, rebuild clusters from scratch.
        progress: called with a step name as each step starts.
        keywords: memory id → keyword counts, filled once per run when a step needs them.
    """

    rt: Runtime
    cons: ConsolidationStore
    tuning: SleepTuning
    dyn: Dynamics
    now: float
    force: bool = False
    progress: Callable[[str], None] | None = None
    keywords: dict[int, dict[str, int]] | None = field(default=None, repr=False)

    def keyword_map(self) -> dict[int, dict[str, int]]:
        """Keyword counts of every live memory, from the cache or computed (and cached)."""
        if self.keywords is not None:
            return self.keywords
        from tideline.sleep.keywords import extract, memory_text

        cached = self.cons.cached_keywords()
        out: dict[int, dict[str, int]] = {}
        fresh: list[tuple[int, int, str]] = []
        exact = self.tuning.topic_exact_pos
        for mid, version, _scope, gesture, context, direction, tags in self.cons.text_rows():
            hit = cached.get(int(mid))
            if hit is not None and hit[0] == int(version):
                out[int(mid)] = json.loads(hit[1])
                continue
            kws = extract(memory_text(gesture, context, direction), json.loads(tags),
                          exact_pos=exact)
            out[int(mid)] = kws
            fresh.append((int(mid), int(version), json.dumps(kws, ensure_ascii=False)))
        if fresh:
            self.cons.put_keywords(fresh)
        self.keywords = out
        return out


def guard(ctx: SleepContext, touched: int, total: int, what: str) -> dict[str, Any] | None:
    """Stop a step that would touch too large a share of its rows (unless forced).

    Args:
        ctx: the run.
        touched: rows the step would demote, prune or otherwise reduce.
        total: rows it could have touched.
        what: a few words naming the change, for the report.

    Returns:
        None when the step may go on, else the ``stopped`` record to report.
    """
    t = ctx.tuning
    limit = max(t.guard_min, int(t.max_touch_share * total))
    if ctx.force or touched <= limit:
        return None
    return {"reason": f"would {what} {touched} of {total} (limit {limit}); "
                      "run `tideline sleep --force` to allow it",
            "would_touch": touched, "limit": limit}
