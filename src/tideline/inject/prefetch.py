"""The per-prompt block: T1 session bridge and T4 active retrieval.

One hybrid recall runs for the prompt (without abstention, so the tiers can
apply their own rules):

* **T1** keeps the hits whose cosine is at or above the T1 floor (default: the
  embedder profile's ``floor``), plus a few turns of recent context;
* **T4** runs when T1 brought fewer than ``t4_trigger`` items: the rest of the
  fused ranking (lexical hits, graph neighbours), unless recall abstained.

Turns of the current session are left out (the agent already has them). What
is injected is journaled with its tier (``T1``/``T4``) in ``attention_log``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from tideline.inject.budget import estimate_tokens
from tideline.inject.result import InjectResult, TierBlock, assemble
from tideline.inject.tuning import InjectTuning
from tideline.models import RecallItem, RecallPacket
from tideline.project import ProjectInfo
from tideline.recall.request import recall
from tideline.render import item_line, one_line, turn_line
from tideline.scopes import visible_scopes
from tideline.store.agent import AgentReader

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["PREFETCH_SHARES", "RecentMode", "build_prefetch"]

#: The shares of the prefetch budget: T1 (session bridge) and T4 (active retrieval).
PREFETCH_SHARES = {"T1": 0.6, "T4": 0.4}
#: Which recent turns T1 shows: this session's, the bridge to the last one, or none.
RecentMode = Literal["session", "bridge", "off"]


def _recent(reader: AgentReader, scopes: Sequence[str], session: str | None, mode: RecentMode,
            tuning: InjectTuning) -> tuple[list[dict[str, Any]], str]:
    """Recent context for T1: the current session's last turns, or the previous session's."""
    n = tuning.t1_recent_turns
    if mode == "off" or n <= 0:
        return [], ""
    if session and reader.session_has_turns(session, scopes):
        if mode == "session":
            return reader.session_tail(session, n, scopes), "current session"
        return [], ""
    previous = reader.latest_session(scopes, exclude=session)
    if previous is None:
        return [], ""
    return reader.session_tail(previous, n, scopes), f"previous session {previous}"


def _line(item: RecallItem, chars: int) -> str:
    return item_line(dataclasses.replace(item, text=one_line(item.text, chars)))


def _record(rt: Runtime, packet: RecallPacket, items: Sequence[RecallItem], tier: str) -> None:
    from tideline.recall.journal import RecallJournal

    RecallJournal(rt.store, tier).record(dataclasses.replace(packet, items=tuple(items)))


def build_prefetch(
    rt: Runtime, reader: AgentReader, query: str, *, info: ProjectInfo, tuning: InjectTuning,
    budget: int | None = None, session: str | None = None, recent: RecentMode = "session",
    log: bool = True,
) -> InjectResult:
    """Build the T1/T4 block for one prompt within a token budget.

    Args:
        rt: the memory's parts (for recall and the journal).
        reader: SQL access to the store.
        query: the user's prompt.
        info: the project whose scope (plus ``global``) is searched.
        tuning: thresholds and sizes.
        budget: token budget (default ``tuning.prefetch_tokens``).
        session: the current session (its turns are not repeated).
        recent: ``session`` = last turns of the current session; ``bridge`` = the previous
            session's last turns while the current one has none stored; ``off``.
        log: journal the injected hits with tiers T1/T4.

    Returns:
        The fenced block and per-tier token counts.

    Raises:
        InvalidInput: the query is malformed (NUL, lone surrogate).
        InputTooLarge: the query is over its cap.
    """
    limit = tuning.prefetch_tokens if budget is None else int(budget)
    if not isinstance(query, str) or not query.strip():
        empty = (TierBlock("T1", note="empty prompt"), TierBlock("T4", note="empty prompt"))
        return InjectResult(kind="prefetch", text="", tiers=empty, tokens=0, budget=limit,
                            project=info.name, rule=info.rule, session=session, query="")
    scopes = visible_scopes(info.name)
    profile = rt.embedder.profile
    floor = tuning.t1_floor if tuning.t1_floor is not None else (
        profile.abstain if tuning.t1_floor_from == "abstain" else profile.floor)
    recent_turns, recent_note = _recent(reader, scopes, session, recent, tuning)
    packet = recall(rt, query, scope=info.name or "global",
                    limit=max(1, tuning.t1_limit + tuning.t4_limit), abstain=False,
                    include_turns=True, log=False)
    shown = {t["id"] for t in recent_turns}
    items = [i for i in packet.items if i.status != "dormant" and not (i.type == "turn" and (
        (session and i.session == session) or i.turn_id in shown))]
    # Injection is strict: when recall abstains, nothing it found is put in the prompt.
    t1 = [] if packet.abstained else [i for i in items if i.similarity >= floor][
        : tuning.t1_limit]
    t4: list[RecallItem] = []
    t4_note = f"not needed: T1 brought {len(t1)}"
    if len(t1) < tuning.t4_trigger:
        if packet.abstained:
            t4_note = f"abstained (best cosine {packet.best_similarity:.2f})"
        else:
            chosen = {(i.type, i.id) for i in t1}
            t4 = [i for i in items if (i.type, i.id) not in chosen][: tuning.t4_limit]
            t4_note = f"T1 brought {len(t1)} < {tuning.t4_trigger}"
    if log and packet.query:
        _record(rt, packet, t1, "T1")
        if len(t1) < tuning.t4_trigger:
            _record(rt, packet, t4, "T4")
    t1_lines = [f"Recent ({recent_note}): " + turn_line(t, tuning.t2b_turn_chars)
                for t in recent_turns]
    t1_lines += [_line(i, tuning.item_chars) for i in t1]
    t1_items = [{"type": "recent_turn", "id": t["id"], "session": t["session"],
                 "turn_index": t["turn_index"]} for t in recent_turns]
    t1_items += [i.to_dict() for i in t1]
    t1_note = f"cosine >= {floor:.2f}: {len(t1)} hit(s)"
    blocks = [TierBlock("T1", tuple(t1_lines), tuple(t1_items), note=t1_note),
              TierBlock("T4", tuple(_line(i, tuning.item_chars) for i in t4),
                        tuple(i.to_dict() for i in t4), note=t4_note)]
    text, fitted = assemble("prefetch", blocks, limit, PREFETCH_SHARES,
                            {"project": info.name or "global", "source": "tideline"})
    return InjectResult(
        kind="prefetch", text=text, tiers=fitted, tokens=estimate_tokens(text), budget=limit,
        project=info.name, rule=info.rule, session=session, query=packet.query,
        extra={"floor": floor, "abstained": packet.abstained,
               "best_similarity": round(packet.best_similarity, 4),
               "recall_ms": round(packet.latency_ms, 2)},
    )
