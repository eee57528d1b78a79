"""The facade's verbs for sleep: mixed into :class:`tideline.Memory`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tideline.errors import InvalidInput
from tideline.write.validate import clean_flag, clean_int, clean_number

if TYPE_CHECKING:
    from tideline.config import Config
    from tideline.embed.base import Embedder
    from tideline.sleep.scan import ScanResult
    from tideline.store.sqlite import SQLiteStore

__all__ = ["SleepMixin"]


class SleepMixin:
    """Sleep: trace dynamics, learned associations, the script layer and the report."""

    store: SQLiteStore
    config: Config
    embedder: Embedder
    project: str | None

    def sleep(
        self, *, only: str | None = None, force: bool = False,
        progress: Callable[[str], None] | None = None, wait_s: float | None = None,
    ) -> dict[str, Any]:
        """Consolidate offline: plasticity, dynamics, recurrence, clusters, entities, scan.

        Deterministic, no LLM, safe to run at any time: it backs the store up first,
        skips in milliseconds when nothing changed since the last sleep, runs one at a
        time across processes, and never deletes a memory.

        Args:
            only: run just this step: plasticity, dynamics, recurrence, entities, topics,
                clusters, attention, backfill or scan (no gate).
            force: run even when nothing changed; let steps that stopped themselves (too
                large a change) go on; rebuild clusters from scratch.
            progress: called with each step's name as it starts.
            wait_s: how long to wait for a sleep running in another process
                (default ``SleepTuning.lock_wait_s``).

        Returns:
            ``{"skipped": True, "reason": …}`` when gated, else ``skipped: False`` with
            per-step metrics under ``steps``, ``errors``, ``stopped`` and ``needs_force``.

        Raises:
            InvalidInput: ``only`` names no step.
            StoreBusy: the database stayed locked.
        """
        from tideline.sleep.orchestrate import run_sleep

        if only is not None and not isinstance(only, str):
            raise InvalidInput(f"only must name a step, got {type(only).__name__}")
        force = clean_flag(force, "force")
        if progress is not None and not callable(progress):
            raise InvalidInput("progress must be callable")
        if wait_s is not None:
            wait_s = clean_number(wait_s, "wait_s", lo=0.0, hi=86_400.0)
        return run_sleep(self, only=only, force=force, progress=progress,  # type: ignore[arg-type]
                         wait_s=wait_s)

    def attention_heatmap(
        self, *, scope: str | None = None, days: int = 30, all_scopes: bool = False,
        top: int = 10,
    ) -> dict[str, Any]:
        """Which memory clusters recall lights up, and which are deserts (JSON-ready).

        Args:
            scope: the project (default: the current one); ``global`` is always included.
            days: the window, ending now.
            all_scopes: every scope of the namespace instead.
            top: how many lit clusters and deserts to list.

        Returns:
            See :func:`tideline.sleep.attention.heatmap`.

        Raises:
            InvalidInput: ``days`` or ``top`` out of range.
        """
        from tideline.sleep.attention import heatmap
        from tideline.store.consolidation import ConsolidationStore

        days = clean_int(days, "days", lo=1, hi=3650)
        top = clean_int(top, "top", lo=1, hi=1000)
        scopes = None if clean_flag(all_scopes, "all_scopes") else self._sleep_scopes(scope)
        return heatmap(ConsolidationStore(self.store), scopes=scopes, days=days, top=top)

    def scan_unindexed(
        self, *, gap_minutes: int | None = None, max_turns: int | None = None,
        scope: str | None = None, all_scopes: bool = True,
    ) -> ScanResult:
        """Context not yet solidified: unlinked memories (A) and recent raw turns (B).

        Args:
            gap_minutes: a longer silence inside a session starts a new chunk.
            max_turns: at most this many (newest) turns.
            scope: only this project (with ``global``) when ``all_scopes`` is False.
            all_scopes: scan every scope (default).

        Returns:
            A :class:`~tideline.sleep.scan.ScanResult` with its Markdown.

        Raises:
            InvalidInput: a limit out of range.
        """
        from tideline.sleep.scan import scan_unindexed

        t = self.config.sleep
        gap = t.scan_gap_minutes if gap_minutes is None else clean_int(
            gap_minutes, "gap_minutes", lo=1, hi=10**9)
        turns = t.scan_max_turns if max_turns is None else clean_int(
            max_turns, "max_turns", lo=1, hi=self.config.caps.batch)
        scopes = None if clean_flag(all_scopes, "all_scopes") else self._sleep_scopes(scope)
        return scan_unindexed(self.store, gap_minutes=gap, max_turns=turns, scopes=scopes)

    def topics(self, *, scope: str | None = None, limit: int = 25,
               all_scopes: bool = False) -> list[dict[str, Any]]:
        """Topic clusters (keyword → memories), largest first, built by sleep.

        Raises:
            InvalidInput: ``limit`` out of range.
        """
        from tideline.store.consolidation import ConsolidationStore

        limit = clean_int(limit, "limit", lo=1, hi=1000)
        scopes = None if clean_flag(all_scopes, "all_scopes") else self._sleep_scopes(scope)
        return ConsolidationStore(self.store).topics(scopes, limit)

    def entity_graph(self, *, limit: int = 100) -> dict[str, list[dict[str, Any]]]:
        """The entity graph built by sleep: nodes (mentions, roles) and edges (role pairs).

        Raises:
            InvalidInput: ``limit`` out of range.
        """
        from tideline.store.consolidation import ConsolidationStore

        return ConsolidationStore(self.store).entity_graph(
            clean_int(limit, "limit", lo=1, hi=10_000))

    def report(self, *, days: int = 30) -> dict[str, Any]:
        """How the memory behaves over time: growth, gate, recall, dynamics, sleeps, hooks.

        Args:
            days: the window for time series and rates.

        Returns:
            The JSON-ready report (see :mod:`tideline.report`).

        Raises:
            InvalidInput: ``days`` out of range.
        """
        from tideline.report.build import build_report

        days = clean_int(days, "days", lo=1, hi=3650)
        return build_report(self, days=days)  # type: ignore[arg-type]

    def _sleep_scopes(self, scope: str | None) -> list[str]:
        from tideline.write.validate import clean_name

        current = scope if scope is not None else (self.project or "global")
        current = clean_name(current, "scope", self.config.caps)
        return list(dict.fromkeys([current, "global"]))
