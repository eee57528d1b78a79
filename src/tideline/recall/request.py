"""A recall request from any caller: validated, scoped, journaled, then asked of the engine.

The facade's ``recall``, the per-prompt injection (T1/T4) and ``read_context`` all
recall through :func:`recall`, so the caps, the scope rule and the journal are the
same for each of them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from tideline.errors import InputTooLarge
from tideline.models import RecallPacket
from tideline.write.validate import clean_flag, clean_int, clean_name, clean_text, parse_time

if TYPE_CHECKING:
    from tideline.runtime import Runtime

__all__ = ["recall"]


def recall(
    rt: Runtime, query: str, *, scope: str | None = None, limit: int | None = None,
    kind: str | None = None, since: object = None, until: object = None,
    include_turns: bool = True, abstain: bool = False, tier: str = "recall", log: bool = True,
) -> RecallPacket:
    """Recall what is relevant to ``query`` in ``scope`` (default: the project) and ``global``.

    The arguments are those of :meth:`tideline.Memory.recall`.

    Returns:
        A :class:`~tideline.models.RecallPacket`.

    Raises:
        InvalidInput: bad query or filter.
        InputTooLarge: query or limit over its cap.
    """
    caps = rt.config.caps
    text = clean_text(query, "query", caps.query_chars)
    current, scopes = rt.scopes(scope)
    k = rt.config.recall.limit if limit is None else clean_int(limit, "limit", lo=1)
    if k > caps.limit:
        raise InputTooLarge(f"limit {k} is over the cap {caps.limit}")
    if kind is not None:
        kind = clean_name(kind, "kind", caps)
    include_turns = clean_flag(include_turns, "include_turns")
    abstain = clean_flag(abstain, "abstain")
    log = clean_flag(log, "log")
    tier = clean_name(tier, "tier", caps)
    after, before = parse_time(since, "since"), parse_time(until, "until")
    if not text:
        return RecallPacket(query=text, scope=current, items=(), abstained=True,
                            latency_ms=0.0)
    from tideline.recall.journal import RecallJournal

    journal = RecallJournal(rt.store, tier) if log else None
    packet = rt.engine.recall(
        text, scopes=scopes, scope=current, limit=k, kind=kind,
        since=after, until=before,
        include_turns=include_turns, abstain=abstain,
        on_hits=journal.record if journal else None,
    )
    # A PostgreSQL store whose primary is gone (a failover) answered from a standby.
    read_only = getattr(rt.store, "read_only", None)
    if read_only is not None and read_only():
        packet = dataclasses.replace(packet, read_only=True)
    return packet
