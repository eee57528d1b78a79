"""The facade's verbs for agent integration, mixed into :class:`tideline.Memory`.

Injection (``inject_brief``, ``inject_prefetch``), reading raw context behind a
memory (``read_context``), the attention summary, and the importers
(``import_claude``, ``import_hermes``, ``import_jsonl``). The CLI, the MCP
server, the Claude Code hooks and the Hermes plugin all call these.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from tideline.errors import InputTooLarge, InvalidInput
from tideline.inject.tuning import InjectTuning
from tideline.project import ProjectInfo
from tideline.write.validate import (
    clean_callback,
    clean_flag,
    clean_int,
    clean_number,
    clean_paths,
    clean_seq,
    clean_text,
)

if TYPE_CHECKING:
    from tideline.inject.identity import IdentityDoc
    from tideline.inject.prefetch import RecentMode
    from tideline.inject.result import InjectResult
    from tideline.memory import Memory
    from tideline.models import ImportResult
    from tideline.store.agent import AgentReader

__all__ = ["InjectMixin"]

Progress = Callable[[int, int], None]


class InjectMixin:
    """Injection tiers T0–T4, raw-context reading and importers (agent integration)."""

    _project_info: ProjectInfo | None = None
    _inject_tuning: InjectTuning | None = None

    def _mem(self) -> Memory:
        return cast("Memory", self)

    @property
    def _agent(self) -> AgentReader:
        return self._mem().store.agent

    # -- project and settings -------------------------------------------------------------

    def use_project(self, info: ProjectInfo) -> None:
        """Switch the current project to a detected one (keeps the rule for introspection).

        Raises:
            InvalidInput: the name is not a valid scope.
        """
        from tideline.write.validate import clean_name

        if not isinstance(info, ProjectInfo):
            raise InvalidInput(f"info must be a ProjectInfo, got {type(info).__name__}")
        mem = self._mem()
        mem.project = None if info.name is None else clean_name(info.name, "project",
                                                                  mem.config.caps)
        self._project_info = info

    @property
    def project_info(self) -> ProjectInfo:
        """The current project and how it was chosen (``explicit``, ``TIDELINE_PROJECT``…)."""
        mem = self._mem()
        info = self._project_info
        if info is not None and info.name == mem.project:
            return info
        if mem.project is None:
            return ProjectInfo(None, "none")
        env = (os.environ.get("TIDELINE_PROJECT") or "").strip()
        rule = "TIDELINE_PROJECT" if env and env == mem.project else "explicit"
        return ProjectInfo(mem.project, rule, mem.project)

    @property
    def inject_tuning(self) -> InjectTuning:
        """Injection thresholds (defaults, then ``TIDELINE_INJECT_*``); assignable."""
        if self._inject_tuning is None:
            self._inject_tuning = InjectTuning.load()
        return self._inject_tuning

    @inject_tuning.setter
    def inject_tuning(self, value: InjectTuning) -> None:
        if not isinstance(value, InjectTuning):
            raise InvalidInput(f"inject_tuning must be an InjectTuning, got {type(value).__name__}")
        self._inject_tuning = value

    def identity(self) -> IdentityDoc | None:
        """The identity file (``$TIDELINE_IDENTITY`` or ``<store>/SOUL.md``), if present."""
        from tideline.inject.identity import read_identity

        return read_identity(self._mem().config.home)

    def _info_for(self, scope: str | None) -> ProjectInfo:
        if scope is None:
            return self.project_info
        from tideline.write.validate import clean_name

        name = clean_name(scope, "scope", self._mem().config.caps)
        return ProjectInfo(None if name == "global" else name, "explicit", name)

    # -- injection ------------------------------------------------------------------------

    def inject_brief(
        self, *, session: str | None = None, budget: int | None = None,
        tiers: Sequence[str] = ("T0", "T2", "T2b", "T3"), scope: str | None = None,
    ) -> InjectResult:
        """The session brief: T0 identity anchor, T2 prefetch cache, T2b context bridge, T3 map.

        Needs no embedding (pure SQL). Fenced as recalled data, within a token budget.

        Args:
            session: the session being started (left out of the T2b bridge).
            budget: token budget (default ``inject_tuning.brief_tokens``).
            tiers: which tiers to build.
            scope: the project (default: the current one); ``global`` for none.

        Returns:
            The block (``.text``) and per-tier token counts (``.tier_tokens``).

        Raises:
            InvalidInput: an unknown tier, a bad scope or a negative budget.
        """
        from tideline.inject.brief import BRIEF_TIERS, build_brief

        wanted = clean_seq(tiers, "tiers")
        unknown = [t for t in wanted if not isinstance(t, str) or t not in BRIEF_TIERS]
        if unknown:
            raise InvalidInput(f"brief tiers are {', '.join(BRIEF_TIERS)}; got {unknown!r:.200}")
        tiers = tuple(cast("list[str]", wanted))
        budget, session = self._budget_session(budget, session)
        return build_brief(self._agent, info=self._info_for(scope), identity=self.identity(),
                           tuning=self.inject_tuning, budget=budget, session=session,
                           tiers=tiers, agent=self._mem().config.agent_name)

    def inject_prefetch(
        self, query: str, *, session: str | None = None, budget: int | None = None,
        scope: str | None = None, recent: RecentMode = "session", log: bool = True,
    ) -> InjectResult:
        """The per-prompt block: T1 session bridge and, when T1 brings too little, T4 retrieval.

        Args:
            query: the user's prompt.
            session: the current session (its turns are not repeated).
            budget: token budget (default ``inject_tuning.prefetch_tokens``).
            scope: the project (default: the current one).
            recent: ``session``, ``bridge`` or ``off`` (see :func:`build_prefetch`).
            log: journal injected hits in ``attention_log`` with tier T1/T4.

        Returns:
            The block and per-tier token counts.

        Raises:
            InvalidInput: a malformed query or setting.
            InputTooLarge: the query is over its cap.
        """
        from tideline.inject.prefetch import build_prefetch

        if not isinstance(recent, str) or recent not in ("session", "bridge", "off"):
            raise InvalidInput("recent must be session, bridge or off")
        budget, session = self._budget_session(budget, session)
        log = clean_flag(log, "log")
        return build_prefetch(self._mem(), self._agent, query, info=self._info_for(scope),
                              tuning=self.inject_tuning, budget=budget, session=session,
                              recent=recent, log=log)

    def _budget_session(self, budget: object, session: object) -> tuple[int | None, str | None]:
        caps = self._mem().config.caps
        tokens = None if budget is None else clean_int(budget, "budget", lo=0)
        name = None if session is None else clean_text(session, "session", caps.name_chars)
        return tokens, name

    # -- raw context ----------------------------------------------------------------------

    def read_context(
        self, *, memory_id: int | None = None, query: str | None = None,
        session: str | None = None, around: int | None = None, radius: int = 3,
        limit: int = 20, scope: str | None = None,
    ) -> dict[str, Any]:
        """Raw turns behind memories: follow source_links, search texture, or show a window.

        Exactly one of ``memory_id`` (the turns a memory came from, each with ``radius``
        turns around it), ``query`` (search raw context by words and meaning) or
        ``session`` (a window of that session around turn ``around``, or its end).
        Every mode answers only from ``scope`` (default: the current project) and
        ``global``: another project's memory is not found, its turns are not shown.

        Raises:
            InvalidInput: none or several modes, or bad numbers.
            NotFound: no such memory in the project or ``global``.
        """
        mem = self._mem()
        modes = [m for m in (memory_id, query, session) if m is not None]
        if len(modes) != 1:
            raise InvalidInput("give exactly one of memory_id, query or session")
        radius = clean_int(radius, "radius", lo=0, hi=50)
        limit = clean_int(limit, "limit", lo=1)
        if limit > mem.config.caps.limit:
            raise InputTooLarge(f"limit must be 1–{mem.config.caps.limit}")
        if around is not None:
            around = clean_int(around, "around", lo=0)
        current, visible = mem._scopes(scope)
        if memory_id is not None:
            rec = mem.get(memory_id, scope=current)
            linked = mem.turns(rec.source_links, scope=current)
            windows: list[dict[str, Any]] = []
            for t in linked[:limit]:
                near = mem.store.session_turns(t.session, around=t.turn_index, radius=radius,
                                               limit=2 * radius + 1, scopes=[t.scope])
                windows.append({"turn": t.to_dict(), "window": [w.to_dict() for w in near]})
            return {"mode": "memory", "memory": rec.to_dict(), "linked": len(linked),
                    "turns": windows}
        if query is not None:
            packet = mem.recall(query, scope=current, limit=min(mem.config.caps.limit, limit * 3),
                                include_turns=True, abstain=False, log=False)
            hits = [i.to_dict() for i in packet.items
                    if i.type == "turn" and i.scope in visible][:limit]
            return {"mode": "query", "query": packet.query, "scope": packet.scope,
                    "turns": hits, "best_similarity": round(packet.best_similarity, 4)}
        from tideline.write.validate import clean_text

        name = clean_text(session, "session", mem.config.caps.name_chars, required=True)
        if around is None:
            from tideline.models import iso

            rows = [t | {"timestamp": iso(t["timestamp"]), "recorded_at": iso(t["recorded_at"])}
                    for t in self._agent.session_tail(name, limit, visible)]
            return {"mode": "session", "session": name, "scope": current, "turns": rows}
        near = mem.store.session_turns(name, around=around, radius=radius, limit=limit,
                                       scopes=visible)
        return {"mode": "session", "session": name, "scope": current,
                "turns": [t.to_dict() for t in near]}

    def attention_summary(self, *, days: float | None = 30.0,
                          scope: str | None = None) -> dict[str, Any]:
        """Clusters (or tags) that recall lights up vs deserts, from ``attention_log``.

        Used until sleep provides ``attention_heatmap``; same shape of answer.

        Raises:
            InvalidInput: a negative window or bad scope.
        """
        if days is not None:
            days = clean_number(days, "days", lo=0.0, hi=36_500.0)
        from tideline.inject.brief import scopes_for

        info = self._info_for(scope)
        since = None if days is None else time.time() - days * 86400.0
        return self._agent.attention_heatmap(scopes_for(info.name), since)

    # -- importers ------------------------------------------------------------------------

    def _import_turns(self, turns: list[dict[str, Any]], *, source: str, scope: str | None,
                      progress: Progress | None) -> tuple[int, int, set[str], list[int]]:
        mem = self._mem()
        batch = mem.config.caps.batch
        inserted = skipped = 0
        sessions: set[str] = set()
        ids: list[int] = []
        total = len(turns)
        for start in range(0, total, batch):
            chunk = turns[start:start + batch]

            def step(done: int, _n: int, base: int = start) -> None:
                if progress is not None:
                    progress(base + done, total)

            res: ImportResult = mem.add_turns(chunk, scope=scope, source=source, progress=step)
            inserted += res.inserted
            skipped += res.skipped
            ids.extend(res.turn_ids)
            sessions.update(str(t.get("session")) for t in chunk)
        if progress is not None:
            progress(total, total)
        return inserted, skipped, sessions, ids

    def import_claude(
        self, paths: Sequence[str | Path] | None = None, *, scope: str | None = None,
        tool_results: bool = False, progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Import Claude Code transcripts into raw context (idempotent by message uuid).

        Args:
            paths: transcript files or directories (default: ``~/.claude/projects``).
            scope: the project for all turns (default: named after each transcript's cwd).
            tool_results: keep tool results too (shortened).
            progress: called with (done, total) turns while embedding.

        Returns:
            Files, inserted and skipped (already stored) turns, sessions, skip reasons.

        Raises:
            NotFound: a given path does not exist.
        """
        from tideline.ingest.claude import SOURCE, find_transcripts, parse_transcript

        tool_results = clean_flag(tool_results, "tool_results")
        clean_callback(progress)
        files = find_transcripts(clean_paths(paths, "paths"))
        turns: list[dict[str, Any]] = []
        dropped: Counter[str] = Counter()
        for f in files:
            parsed = parse_transcript(f, scope=scope, tool_results=tool_results)
            turns.extend(parsed.turns)
            dropped.update(parsed.skipped)
        known = self._agent.existing_message_ids(SOURCE, [str(t["id"]) for t in turns])
        fresh: list[dict[str, Any]] = []
        for t in turns:  # a message copied into several transcripts is stored once
            if t["id"] not in known:
                known.add(t["id"])
                fresh.append(t)
        inserted, skipped, sessions, ids = self._import_turns(fresh, source=SOURCE, scope=scope,
                                                             progress=progress)
        return {"source": SOURCE, "files": len(files), "turns": len(turns),
                "inserted": inserted, "skipped": skipped + len(turns) - len(fresh),
                "sessions": len({t["session"] for t in turns}), "dropped": dict(dropped),
                "turn_ids": ids}

    def import_hermes(
        self, paths: Sequence[str | Path] | None = None, *, scope: str | None = None,
        session: str | None = None, tool_results: bool = False,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Import Hermes Agent sessions (``state.db`` or ``hermes sessions export`` JSONL).

        Turns the Hermes plugin already captured live are not stored twice.

        Args:
            paths: ``state.db`` files, export files or Hermes homes (default ``$HERMES_HOME``).
            scope: the project for all turns (default: each session's repo/cwd name).
            session: only this session (id or unique prefix).
            tool_results: keep tool results too (shortened).
            progress: called with (done, total) turns while embedding.

        Raises:
            NotFound: no sessions at a path.
            StoreCorrupt: a database is not Hermes'.
        """
        from tideline.ingest.hermes import SOURCE, hermes_turns, read_hermes

        tool_results = clean_flag(tool_results, "tool_results")
        clean_callback(progress)
        if session is not None:
            session = clean_text(session, "session", self._mem().config.caps.name_chars,
                                 required=True)
        sessions = read_hermes(clean_paths(paths, "paths"), session=session)
        parsed = hermes_turns(sessions, scope=scope, tool_results=tool_results)
        reader = self._agent
        known = reader.existing_message_ids(SOURCE, [str(t["id"]) for t in parsed.turns
                                                     if "id" in t])
        fresh: list[dict[str, Any]] = []
        prints: dict[str, set[tuple[str, str]]] = {}
        duplicates = 0
        for t in parsed.turns:
            if t.get("id") in known:
                continue
            sid = str(t["session"])
            if sid not in prints:
                prints[sid] = reader.session_fingerprints(sid)
            if (t["role"], t["text"]) in prints[sid]:
                duplicates += 1
                continue
            fresh.append(t)
        inserted, skipped, _sessions, ids = self._import_turns(fresh, source=SOURCE,
                                                               scope=scope, progress=progress)
        return {"source": SOURCE, "sessions": len(parsed.sessions), "turns": len(parsed.turns),
                "inserted": inserted,
                "skipped": skipped + len(parsed.turns) - len(fresh),
                "captured_live": duplicates, "dropped": dict(parsed.skipped), "turn_ids": ids}

    def import_jsonl(
        self, path: str | Path, *, scope: str | None = None, source: str = "jsonl",
        progress: Progress | None = None, batch: int | None = None,
    ) -> dict[str, Any]:
        """Import a generic JSONL chat of any length, streamed (see :mod:`tideline.ingest.jsonl`).

        The file is read, embedded and stored ``batch`` lines at a time, each batch one
        transaction. Running it again skips what is stored (ids of id-less turns come
        from their content, counted over the whole file), so an import that was killed
        is completed by repeating it. A malformed line stops the import there: the
        batches before it stay stored, and fixing the line and re-running resumes.

        Args:
            path: the JSONL file.
            scope: the project of turns that name none.
            source: the system the file came from.
            progress: called with (lines read, lines in the file).
            batch: turns per batch and transaction (default ``Caps.import_batch``).

        Returns:
            ``source``, ``files``, ``turns`` (read), ``inserted``, ``skipped``,
            ``sessions``, ``batches`` and ``turn_ids``.

        Raises:
            NotFound: no such file.
            InvalidInput: a line is not a JSON object or a turn is malformed.
            InputTooLarge: a line or a turn is over its cap, or ``batch`` over the batch cap.
        """
        from tideline.ingest.jsonl import count_lines, iter_jsonl
        from tideline.ingest.turns import Occurrences, prepare_turns, store_turns
        from tideline.write.validate import clean_name

        clean_callback(progress)
        given = clean_paths([path], "path")
        mem = self._mem()
        caps = mem.config.caps
        size = caps.import_batch if batch is None else batch
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidInput(f"batch must be a positive integer, got {size!r}")
        if size > caps.batch:
            raise InputTooLarge(f"batch of {size} turns; the cap is {caps.batch}")
        file = Path(given[0]) if given else Path("")
        total = count_lines(file)
        where = mem._scope(scope, write=True)
        src = clean_name(source, "source", caps)
        occurrences = Occurrences()
        sessions: set[str] = set()
        ids: list[int] = []
        read = inserted = skipped = batches = 0
        rows: list[tuple[int, dict[str, Any]]] = []

        def flush() -> None:
            nonlocal read, inserted, skipped, batches
            turns = prepare_turns([obj for _, obj in rows], scope=where, source=src,
                                  session=None, caps=caps, next_index=mem.store.next_turn_index,
                                  occurrences=occurrences,
                                  labels=[f"{file}:{n}" for n, _ in rows])
            res = store_turns(mem.store, mem.embedder, turns, txn_turns=size)
            read += len(turns)
            inserted += res.inserted
            skipped += res.skipped
            batches += 1
            ids.extend(res.turn_ids)
            sessions.update(t.session for t in turns)
            if progress is not None:
                progress(rows[-1][0], total)
            rows.clear()

        for item in iter_jsonl(file, line_bytes=caps.line_bytes):
            rows.append(item)
            if len(rows) >= size:
                flush()
        if rows:
            flush()
        if progress is not None:
            progress(total, total)
        return {"source": src, "files": 1, "turns": read, "inserted": inserted,
                "skipped": skipped, "sessions": len(sessions), "batches": batches,
                "turn_ids": ids}

    def capture_turns(
        self, turns: Sequence[Mapping[str, Any]], *, source: str, scope: str | None = None,
    ) -> dict[str, Any]:
        """Store turns an agent runtime hands over live (hooks, plugins), skipping known ids.

        Returns:
            ``{"inserted", "skipped", "turn_ids"}``.
        """
        rows = []
        for pos, t in enumerate(clean_seq(turns, "turns")):
            if not isinstance(t, Mapping):
                raise InvalidInput(f"turn {pos}: expected an object, got {type(t).__name__}")
            rows.append(dict(t))
        from tideline.write.validate import clean_name

        source = clean_name(source, "source", self._mem().config.caps)
        known = self._agent.existing_message_ids(source, [str(t["id"]) for t in rows
                                                          if t.get("id")])
        fresh = [t for t in rows if not t.get("id") or str(t["id"]) not in known]
        if not fresh:
            return {"inserted": 0, "skipped": len(rows), "turn_ids": []}
        inserted, skipped, _s, ids = self._import_turns(fresh, source=source, scope=scope,
                                                        progress=None)
        return {"inserted": inserted, "skipped": skipped + len(rows) - len(fresh),
                "turn_ids": ids}
