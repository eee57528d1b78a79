"""Claude Code hook handlers: one function per event, JSON on stdin, JSON on stdout.

=================  ===================  ==================================================
command            Claude Code event    what it does
=================  ===================  ==================================================
``session-start``  SessionStart         the brief (T0/T2/T2b/T3) as ``additionalContext``
``prompt``         UserPromptSubmit     the prefetch (T1/T4) for the prompt
``stop``           Stop                 record new turns of the transcript; gated sleep
``pre-compact``    PreCompact           import the whole transcript (idempotent)
``session-end``    SessionEnd           import the whole transcript (idempotent)
=================  ===================  ==================================================

Payload fields read: ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``,
``source`` (SessionStart), ``prompt`` (UserPromptSubmit), ``trigger`` (PreCompact),
``reason`` (SessionEnd). Context goes back as
``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``.

A hook never blocks the agent: any failure writes one line to stderr, records a
``hook_error`` event in the journal (when the store can be opened) and exits 0
with no output. ``session-start`` and a ``stop`` with nothing new read the store
through plain SQL and never import numpy or load the embedding model.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tideline.errors import InvalidInput, NotFound, TidelineError
from tideline.project import ProjectInfo, detect_project

if TYPE_CHECKING:
    from tideline.config import Config
    from tideline.memory import Memory
    from tideline.store.agent import AgentReader

__all__ = ["EVENTS", "HookOutcome", "run_hook"]

#: command name → Claude Code's ``hook_event_name``.
EVENTS = {
    "session-start": "SessionStart",
    "prompt": "UserPromptSubmit",
    "stop": "Stop",
    "pre-compact": "PreCompact",
    "session-end": "SessionEnd",
}
MAX_STDIN = 4 * 1024 * 1024
CLIENT = "claude"


@dataclass
class HookOutcome:
    """What a hook run produced: stdout text, one stderr line (or ''), and a summary."""

    stdout: str = ""
    stderr: str = ""
    summary: dict[str, Any] | None = None


class _Run:
    """One hook invocation: the payload, the settings and lazily opened store handles."""

    def __init__(self, event: str, payload: Mapping[str, Any], config: Config) -> None:
        self.event = event
        self.payload = payload
        self.config = config
        self.session = _text(payload.get("session_id"))
        cwd = _text(payload.get("cwd")) or None
        self.info: ProjectInfo = detect_project(cwd=cwd)
        self._reader: AgentReader | None = None
        self._mem: Memory | None = None

    @property
    def reader(self) -> AgentReader:
        if self._reader is None:
            from tideline.store import open_agent_reader

            self._reader = open_agent_reader(self.config.home, self.config.namespace,
                                             database=self.config.database,
                                             read_url=self.config.database_read_url)
        return self._reader

    @property
    def mem(self) -> Memory:
        if self._mem is None:
            from tideline.memory import Memory

            self._mem = Memory.open(self.config.home, namespace=self.config.namespace)
            self._mem.use_project(self.info)
        return self._mem

    def close(self) -> None:
        if self._mem is not None:
            self._mem.close()
        if self._reader is not None:
            self._reader.close()

    def journal(self, kind: str, data: dict[str, Any]) -> None:
        base = {"client": CLIENT, "event": self.event, "session": self.session,
                "project": self.info.name}
        self.reader.log_event(kind, base | data)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _context(event: str, text: str) -> str:
    return json.dumps({"hookSpecificOutput": {"hookEventName": EVENTS[event],
                                              "additionalContext": text}}, ensure_ascii=False)


def _transcript(run: _Run) -> Path | None:
    raw = _text(run.payload.get("transcript_path"))
    if not raw:
        return None
    path = Path(raw).expanduser()
    if path.suffix != ".jsonl":
        raise InvalidInput(f"transcript_path is not a .jsonl file: {raw}")
    if not path.is_file():
        return None  # Claude Code writes the file lazily; nothing to capture yet
    return path


def _capture(run: _Run) -> dict[str, Any]:
    """Record the transcript's turns that are not stored yet (embedding only those)."""
    from tideline.ingest.claude import SOURCE, parse_transcript

    path = _transcript(run)
    if path is None:
        return {"transcript": None, "new": 0, "inserted": 0}
    where = run.info.name or "global"
    parsed = parse_transcript(path, scope=where)
    keys = [(str(t.get("scope") or where), str(t["id"])) for t in parsed.turns]
    known = run.reader.existing_message_ids(SOURCE, keys)
    fresh = [t for t, key in zip(parsed.turns, keys, strict=True) if key not in known]
    out: dict[str, Any] = {"transcript": str(path), "turns": len(parsed.turns),
                           "new": len(fresh), "inserted": 0}
    if fresh:
        res = run.mem.capture_turns(fresh, source=SOURCE, scope=run.info.name)
        out["inserted"] = res["inserted"]
    return out


def _session_start(run: _Run) -> HookOutcome:
    from tideline.inject.brief import build_brief
    from tideline.inject.identity import read_identity
    from tideline.inject.tuning import InjectTuning

    source = _text(run.payload.get("source")) or "startup"
    # After a compaction the current session's own texture is what was lost: allow it in T2b.
    exclude = None if source == "compact" else (run.session or None)
    from tideline.store.routing import standby_reads

    with standby_reads():  # the brief only reads: a standby may answer it
        result = build_brief(run.reader, info=run.info,
                             identity=read_identity(run.config.home),
                             tuning=InjectTuning.load(), session=exclude,
                             agent=run.config.agent_name)
    run.journal("inject", {"kind": "brief", "source": source, "tokens": result.tokens,
                           "tier_tokens": result.tier_tokens, "rule": run.info.rule})
    summary: dict[str, Any] = {"tokens": result.tokens, "tier_tokens": result.tier_tokens}
    from tideline.hooks import warm

    # Prompts will follow: get the model loaded in the background before the first one.
    summary["warm_started"] = warm.spawn(run.config.home, run.config.namespace,
                                         database=run.config.database)
    return HookOutcome(stdout=_context(run.event, result.text) if result.text else "",
                       summary=summary)


def _prompt(run: _Run) -> HookOutcome:
    prompt = run.payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return HookOutcome(summary={"skipped": "empty prompt"})
    from tideline.hooks import warm

    query = prompt[: run.config.caps.query_chars]
    # The first prompt of a session: the server session-start spawned may still be loading
    # the model; waiting for it (bounded) is faster than loading the model here as well.
    waited = time.perf_counter()
    warm.wait_ready(run.config.home, run.config.namespace)
    waited_ms = round((time.perf_counter() - waited) * 1000, 1)
    answer = warm.ask(run.config.home, run.config.namespace, {
        "op": "prefetch", "query": query, "session": run.session or None,
        "project": run.info.to_dict(), "recent": "bridge"})
    if answer is not None and isinstance(answer.get("result"), dict):
        data, served = answer["result"], "warm"
    else:  # no warm server (or it refused): do the same work here
        data, served = run.mem.inject_prefetch(
            query, session=run.session or None, recent="bridge").to_dict(), "process"
    run.journal("inject", {"kind": "prefetch", "tokens": data["tokens"],
                           "tier_tokens": data["tier_tokens"], "rule": run.info.rule,
                           "served_by": served, "waited_ms": waited_ms})
    summary = {"tokens": data["tokens"], "tier_tokens": data["tier_tokens"], "served_by": served,
               "waited_ms": waited_ms}
    text = str(data.get("text") or "")
    return HookOutcome(stdout=_context(run.event, text) if text else "", summary=summary)


def _stop(run: _Run) -> HookOutcome:
    captured = _capture(run)
    slept: Any = None
    if captured["inserted"] or run.reader.changed_since_sleep():
        sleep = getattr(run.mem, "sleep", None)
        if callable(sleep):
            result = sleep()
            slept = {"skipped": result.get("skipped")} if isinstance(result, dict) else True
        else:
            slept = "unavailable"
        # Checkpoint for the cheap pre-gate: until something else is journaled, the next
        # stop with no new turns returns without importing the engine.
        run.journal("sleep_gate", {"sleep": slept})
    run.journal("hook", {"captured": captured, "sleep": slept})
    return HookOutcome(summary={"captured": captured, "sleep": slept})


def _import(run: _Run) -> HookOutcome:
    captured = _capture(run)
    detail = {"trigger": _text(run.payload.get("trigger")) or None,
              "reason": _text(run.payload.get("reason")) or None}
    run.journal("hook", {"captured": captured} | {k: v for k, v in detail.items() if v})
    return HookOutcome(summary={"captured": captured})


_HANDLERS = {
    "session-start": _session_start,
    "prompt": _prompt,
    "stop": _stop,
    "pre-compact": _import,
    "session-end": _import,
}


def _parse(raw: str) -> dict[str, Any]:
    if len(raw) > MAX_STDIN:
        raise InvalidInput(f"hook payload is over {MAX_STDIN} bytes")
    if not raw.strip():
        raise InvalidInput("empty hook payload on stdin (expected Claude Code's JSON)")
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"hook payload is not JSON: {exc.msg} at {exc.pos}") from None
    if not isinstance(payload, dict):
        raise InvalidInput("hook payload must be a JSON object")
    return payload


def _record_failure(config: Config, event: str, code: str, message: str,
                    payload: Mapping[str, Any] | None) -> None:
    from tideline.store import open_agent_reader

    reader = open_agent_reader(config.home, config.namespace, database=config.database)
    try:
        reader.log_event("hook_error", {
            "client": CLIENT, "event": event, "code": code, "message": message[:500],
            "session": _text((payload or {}).get("session_id")) or None})
    finally:
        reader.close()


def run_hook(event: str, raw: str, config: Config) -> HookOutcome:
    """Run one hook: never raises, never blocks the agent.

    Args:
        event: ``session-start``, ``prompt``, ``stop``, ``pre-compact`` or ``session-end``.
        raw: the JSON payload Claude Code wrote on stdin.
        config: the store settings (home, namespace).

    Returns:
        stdout (JSON with ``hookSpecificOutput`` or ''), one stderr line on failure.
    """
    started = time.perf_counter()
    payload: dict[str, Any] | None = None
    run: _Run | None = None
    try:
        if event not in _HANDLERS:
            raise InvalidInput(f"unknown hook {event!r}; expected one of {', '.join(EVENTS)}")
        payload = _parse(raw)
        named = payload.get("hook_event_name")
        if isinstance(named, str) and named and named != EVENTS[event]:
            raise InvalidInput(f"hook '{event}' received a {named} payload "
                               f"(expected {EVENTS[event]}); check the hook settings")
        run = _Run(event, payload, config)
        outcome = _HANDLERS[event](run)
        if outcome.summary is not None:
            outcome.summary["ms"] = round((time.perf_counter() - started) * 1000, 1)
        return outcome
    except Exception as exc:  # a hook must never fail the agent: report and carry on
        code = exc.code if isinstance(exc, TidelineError) else "internal"
        message = str(exc) if isinstance(exc, TidelineError) else f"{type(exc).__name__}: {exc}"
        if isinstance(exc, NotFound | InvalidInput):
            message = str(exc)
        line = f"tideline hook {event}: {code}: {message}"
        try:
            _record_failure(config, event, code, message, payload)
        except Exception as inner:  # the store itself is unusable; stderr is all we have
            line += f" (journal unavailable: {type(inner).__name__}: {inner})"
        if isinstance(exc, TidelineError) and exc.retryable:
            # A failover or a lock held a moment too long: the next prompt's hook will
            # succeed; the agent's user need not see it (the journal has it if it could).
            return HookOutcome()
        return HookOutcome(stderr=line.replace("\n", " ")[:2000])
    finally:
        if run is not None:
            try:
                run.close()
            except Exception as exc:  # closing must not turn success into a traceback
                print(f"tideline hook {event}: close failed: {exc}", file=sys.stderr)
