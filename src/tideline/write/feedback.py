"""Feedback on recalled memories: a reward reinforces them, a penalty weakens them.

:func:`reflect` answers ``Memory.reflect``: one transaction reads the memories the
project may see, applies the trace dynamics (:mod:`tideline.dynamics`) to each and
journals the call, so a reward is applied once or not at all.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tideline.dynamics import reinforce, weaken
from tideline.errors import InvalidInput
from tideline.write.validate import clean_ids, clean_number

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["reflect"]


def reflect(rt: Runtime, ids: Sequence[int], reward: float, *,
            scope: str | None = None) -> dict[str, Any]:
    """Reward (> 0) or penalise (< 0) memories (see :meth:`tideline.Memory.reflect`).

    Returns:
        ``{"updated": [...], "missing": [...], "reward": r}``; memories of other
        projects count as missing.

    Raises:
        InvalidInput: reward outside −1..1 or bad ids.
    """
    reward = clean_number(reward, "reward", lo=-1.0, hi=1.0)
    if ids is None:
        raise InvalidInput("ids must be a list of memory ids")
    wanted = clean_ids(ids, "ids", rt.config.caps.limit)
    visible = rt.visible(scope)
    now = time.time()
    dyn = rt.config.dynamics
    store = rt.store
    updated: list[int] = []
    with store.transaction() as c:
        found = {mid: rec for mid, rec in store.get_memories(wanted, c).items()
                 if rec.scope in visible}
        for mid, rec in found.items():
            if reward > 0:
                new = reinforce(rec, now, dyn, amount=float(reward))
            elif reward < 0:
                new = weaken(rec, now, dyn, amount=-float(reward))
            else:
                continue
            store.update_memory(c, new)
            updated.append(mid)
        # The reader's scope: the journal shows the event to that project only.
        store.log_event(c, "reflect", {"ids": list(wanted), "reward": reward,
                                       "updated": updated, "scope": visible[0]}, now=now)
    missing = [i for i in wanted if i not in found]
    return {"updated": updated, "missing": missing, "reward": reward}
