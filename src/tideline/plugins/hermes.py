"""Hermes Agent memory provider: Tideline's T0–T4 injection inside Hermes.

==========================  ===============================================
Hermes hook                 Tideline
==========================  ===============================================
``system_prompt_block()``   the brief: T0 identity, T2 high-weight, T2b texture, T3 map
``prefetch(query)``         T1 session bridge + T4 active retrieval for the turn
``sync_turn()``             the user and assistant turn → raw context
``on_pre_compress()``       the messages about to be compressed → raw context
``on_session_end()``        the whole conversation → raw context, then gated sleep
``on_memory_write()``       mirrors Hermes' built-in memory ``add`` as a memory
``get_tool_schemas()``      ``tideline_recall``, ``tideline_memorize``, ``tideline_reflect``
==========================  ===============================================

Hermes (``hermes-agent`` 0.19) loads memory providers only from its bundled
``plugins/memory/<name>/`` and from ``$HERMES_HOME/plugins/<name>/`` directories whose
``__init__.py`` mentions ``MemoryProvider`` and exposes ``register(ctx)``
(``plugins/memory/__init__.py``: ``find_provider_dir``/``load_memory_provider``); no
entry point is consulted. ``tideline install hermes`` writes such a shim (which imports
this module) and selects it with ``memory.provider: tideline``; ``tideline uninstall
hermes`` selects the previous provider again (:mod:`tideline.plugins.hermes_install`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tideline.errors import InvalidInput, TidelineError
from tideline.plugins.hermes_install import PLUGIN_NAME, install_hermes, uninstall_hermes

if TYPE_CHECKING:
    from tideline.memory import Memory

__all__ = ["TidelineMemoryProvider", "install_hermes", "register", "uninstall_hermes"]

SOURCE = "hermes"


def _base() -> type:
    try:
        return importlib.import_module("agent.memory_provider").MemoryProvider  # type: ignore[no-any-return]
    except ImportError:  # Hermes is not installed: the class still works standalone
        return object


_Base: Any = _base()

#: Hermes' tools: (its name, the catalogue tool, the parameters it offers, the required
#: ones). Descriptions, limits and defaults come from :mod:`tideline.tools`, as the MCP
#: server's do; Hermes offers the everyday subset of each tool's parameters.
HERMES_TOOLS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("tideline_recall", "recall", ("query", "limit"), ("query",)),
    ("tideline_memorize", "memorize", ("text", "kind", "scope", "importance"), ("text",)),
    ("tideline_reflect", "reflect", ("ids", "reward"), ("ids", "reward")),
)


def _tool_schemas() -> list[dict[str, Any]]:
    from tideline.tools import TOOLS

    return [{"name": name, "description": TOOLS[tool].description,
             "parameters": TOOLS[tool].input_schema(params, required)}
            for name, tool, params, required in HERMES_TOOLS]


#: OpenAI-style function schemas, as :meth:`TidelineMemoryProvider.get_tool_schemas`
#: returns them (before the agent's name is prefixed).
TOOL_SCHEMAS: list[dict[str, Any]] = _tool_schemas()


def _arguments(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One Hermes tool's arguments: catalogue defaults filled in, numbers and flags checked.

    Each goes through the rule every surface shares (:mod:`tideline.arguments`: the
    facade's own validators with the catalogue's bounds), so ``limit=0``, ``limit="5"``
    or ``reward=9`` are ``invalid_input`` here as on every other surface, never
    truncated or coerced; text and lists are checked by the facade call itself.

    Raises:
        InvalidInput: a value of the wrong JSON type or out of its bounds.
    """
    from tideline.arguments import check_value
    from tideline.tools import TOOLS

    _, tool, params, _required = next(t for t in HERMES_TOOLS if t[0] == name)
    out: dict[str, Any] = {}
    for pname in params:
        spec = TOOLS[tool].param(pname)
        value = args.get(pname)
        if value is None:
            out[pname] = None if spec.required else spec.default
            continue
        out[pname] = check_value(value, spec.schema, pname)
    return out


class TidelineMemoryProvider(_Base):  # type: ignore[misc]
    """A Hermes ``MemoryProvider`` backed by a Tideline store.

    Args:
        store: the store directory (default ``$TIDELINE_HOME`` or ``~/.tideline``).
        namespace: the namespace (default ``$TIDELINE_NAMESPACE`` or ``default``).
        embedder: the embedder for a new store (default ``e5``).
    """

    def __init__(self, *, store: str | Path | None = None, namespace: str | None = None,
                 embedder: str | None = None) -> None:
        self._store = Path(store).expanduser() if store is not None else None
        self._namespace = namespace
        self._embedder = embedder
        self._mem: Memory | None = None
        self._session = ""
        self._context = "primary"
        self._counter = 0
        self._lock = threading.RLock()

    # -- identity and lifecycle -----------------------------------------------------------

    @property
    def name(self) -> str:
        """The provider name Hermes selects with ``memory.provider``."""
        return PLUGIN_NAME

    def is_available(self) -> bool:
        """Local store: available whenever Tideline imports (no network, no credentials)."""
        return True

    def initialize(self, session_id: str, **kwargs: Any) -> None:
        """Open the store for this agent and remember the session and its context."""
        from tideline.memory import Memory
        from tideline.project import detect_project

        with self._lock:
            self._session = str(session_id or "")
            self._context = str(kwargs.get("agent_context") or "primary")
            if self._mem is None:
                info = detect_project()
                mem = Memory.open(self._store, namespace=self._namespace,
                                  embedder=self._embedder, project=info.name)
                mem.use_project(info)
                self._mem = mem

    @property
    def memory(self) -> Memory:
        """The opened memory (initialising with an empty session when needed)."""
        if self._mem is None:
            self.initialize(self._session)
        assert self._mem is not None
        return self._mem

    def shutdown(self) -> None:
        """Close the store."""
        with self._lock:
            if self._mem is not None:
                self._mem.close()
                self._mem = None

    def on_session_switch(self, new_session_id: str, *, parent_session_id: str = "",
                          reset: bool = False, rewound: bool = False, **kwargs: Any) -> None:
        """Follow Hermes to the new session id (resume, branch, reset, compression)."""
        with self._lock:
            self._session = str(new_session_id or "")
            if reset:
                self._counter = 0

    # -- injection ------------------------------------------------------------------------

    def system_prompt_block(self) -> str:
        """T0/T2/T2b/T3: the brief, fenced as recalled data ('' on failure, logged)."""
        with self._lock:
            try:
                return self.memory.inject_brief(session=self._session or None).text
            except TidelineError as exc:
                self._note_error("system_prompt_block", exc)
                return ""

    def prefetch(self, query: str, *, session_id: str = "") -> str:
        """T1/T4 for the upcoming turn ('' when nothing is relevant or on failure)."""
        if not isinstance(query, str) or not query.strip():
            return ""
        with self._lock:
            try:
                mem = self.memory
                return mem.inject_prefetch(query[: mem.config.caps.query_chars],
                                           session=session_id or self._session or None,
                                           recent="bridge").text
            except TidelineError as exc:
                self._note_error("prefetch", exc)
                return ""

    def queue_prefetch(self, query: str, *, session_id: str = "") -> None:
        """Nothing to queue: :meth:`prefetch` answers synchronously in milliseconds."""

    # -- capture --------------------------------------------------------------------------

    def sync_turn(self, user_content: str, assistant_content: str, *, session_id: str = "",
                  messages: list[dict[str, Any]] | None = None) -> None:
        """Store the completed turn (user and assistant text) as raw context."""
        if self._context != "primary":
            return  # sub-agents, cron and flush contexts must not write the user's memory
        sid = session_id or self._session or "hermes"
        now = time.time()
        turns: list[dict[str, Any]] = []
        for role, text in (("user", user_content), ("assistant", assistant_content)):
            if not isinstance(text, str) or not text.strip():
                continue
            pos = _position(messages, role, text)
            self._counter += 1
            ident = (f"live:{sid}:{pos}" if pos is not None
                     else f"live:{sid}:n{self._counter}:{_digest(role, text)}")
            turns.append({"id": ident, "session": sid, "role": role, "speaker": role,
                          "text": text, "timestamp": now})
        self._capture(turns, "sync_turn")

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        """Capture the messages about to be compressed; contributes no summary text."""
        if self._context == "primary":
            self._capture(_from_messages(messages, self._session or "hermes"), "pre_compress")
        return ""

    def on_session_end(self, messages: list[dict[str, Any]]) -> None:
        """Capture the whole conversation, then run the gated sleep if available."""
        if self._context != "primary":
            return
        self._capture(_from_messages(messages, self._session or "hermes"), "session_end")
        with self._lock:
            sleep = getattr(self.memory, "sleep", None)
            if callable(sleep):
                try:
                    sleep()
                except TidelineError as exc:
                    self._note_error("session_end", exc)

    def on_memory_write(self, action: str, target: str, content: str,
                        metadata: dict[str, Any] | None = None) -> None:
        """Mirror Hermes' built-in memory ``add`` (user facts → global preferences)."""
        if action != "add" or not isinstance(content, str) or not content.strip():
            return
        with self._lock:
            try:
                kind = "preference" if target == "user" else "fact"
                scope = "global" if target == "user" else self.memory.project
                self.memory.remember(content, kind=kind, scope=scope, source="hermes",
                                     tags=["hermes-memory"])
            except TidelineError as exc:
                self._note_error("on_memory_write", exc)

    def _capture(self, turns: list[dict[str, Any]], where: str) -> None:
        if not turns:
            return
        with self._lock:
            try:
                mem = self.memory
                fresh = _unseen(mem, turns)
                if fresh:
                    mem.capture_turns(fresh, source=SOURCE, scope=mem.project)
            except TidelineError as exc:
                self._note_error(where, exc)

    def _note_error(self, where: str, exc: Exception) -> None:
        import logging

        logging.getLogger("tideline.hermes").warning("tideline %s failed: %s: %s", where,
                                                     getattr(exc, "code", "error"), exc)
        try:
            if self._mem is not None:
                self._mem.store.log_event(None, "hook_error", {
                    "client": "hermes", "event": where, "code": getattr(exc, "code", "error"),
                    "message": str(exc)[:500], "session": self._session or None})
        except TidelineError:
            pass

    # -- tools ----------------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI-style schemas of the three ``tideline_*`` tools (naming the agent, if set)."""
        agent = self._agent_name()
        if not agent:
            return [dict(s) for s in TOOL_SCHEMAS]
        return [dict(s, description=f"Memory of {agent}. {s['description']}")
                for s in TOOL_SCHEMAS]

    def _agent_name(self) -> str:
        """``$TIDELINE_AGENT_NAME`` (through the config), '' when unset or unreadable."""
        if self._mem is not None:
            return self._mem.config.agent_name
        from tideline.config import Config

        try:
            return Config.load().agent_name
        except TidelineError:
            return ""

    def handle_tool_call(self, tool_name: str, args: dict[str, Any], **kwargs: Any) -> str:
        """Run one of the tools; always answers JSON (errors as ``{"error": {code, message}}``)."""
        with self._lock:
            try:
                mem = self.memory
                if not isinstance(args, dict):
                    raise InvalidInput(f"{tool_name} arguments must be an object")
                if tool_name == "tideline_recall":
                    a = _arguments(tool_name, args)
                    query = a["query"]
                    if not isinstance(query, str) or not query.strip():
                        # Abstaining here would tell the model "nothing is remembered".
                        raise InvalidInput("tideline_recall needs a non-empty 'query'")
                    packet = mem.recall(query, limit=a["limit"])
                    from tideline.render import fence, packet_text

                    return json.dumps({"text": fence("recall", packet_text(packet)),
                                       **packet.to_dict()}, ensure_ascii=False, default=str)
                if tool_name == "tideline_memorize":
                    a = _arguments(tool_name, args)
                    res = mem.remember(a["text"], kind=a["kind"] or "fact",
                                       scope=a["scope"] or None, importance=a["importance"],
                                       source="hermes")
                    return json.dumps(res.to_dict())
                if tool_name == "tideline_reflect":
                    a = _arguments(tool_name, args)
                    return json.dumps(mem.reflect(a["ids"] if a["ids"] is not None else [],
                                                  a["reward"]))
                raise InvalidInput(f"unknown tool {tool_name!r}")
            except TidelineError as exc:
                return json.dumps({"error": {"code": exc.code, "message": str(exc)}})
            except (TypeError, ValueError) as exc:
                return json.dumps({"error": {"code": "invalid_input", "message": str(exc)}})

    # -- configuration --------------------------------------------------------------------

    def get_config_schema(self) -> list[dict[str, Any]]:
        """Settings for ``hermes memory setup`` (all through environment variables)."""
        return [
            {"key": "store", "description": "Tideline store directory",
             "default": "~/.tideline", "env_var": "TIDELINE_HOME"},
            {"key": "namespace", "description": "Namespace inside the store",
             "default": "default", "env_var": "TIDELINE_NAMESPACE"},
            {"key": "project", "description": "Project scope (default: detected)",
             "env_var": "TIDELINE_PROJECT"},
            {"key": "agent_name", "description": "The agent's name, shown in the tool "
             "descriptions and the brief (the seed's AGENT_NAME)",
             "env_var": "TIDELINE_AGENT_NAME"},
        ]

    def save_config(self, values: dict[str, Any], hermes_home: str) -> None:
        """Nothing to write: Tideline reads its settings from the environment."""

    def backup_paths(self) -> list[str]:
        """The store directory (it lives outside ``HERMES_HOME``)."""
        from tideline.config import default_home

        return [str(self._store or default_home())]


def register(ctx: Any) -> None:
    """Hermes plugin entry: ``ctx.register_memory_provider(TidelineMemoryProvider())``."""
    ctx.register_memory_provider(TidelineMemoryProvider())


def _digest(role: str, text: str) -> str:
    return hashlib.sha256(f"{role}\x1f{text}".encode("utf-8", "replace")).hexdigest()[:12]


def _text(content: Any) -> str:
    if isinstance(content, list):
        content = "\n".join(str(p.get("text", "")) for p in content
                            if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    return content.strip() if isinstance(content, str) else ""


def _position(messages: Sequence[dict[str, Any]] | None, role: str, text: str) -> int | None:
    if not messages:
        return None
    for pos in range(len(messages) - 1, -1, -1):
        msg = messages[pos]
        if isinstance(msg, dict) and msg.get("role") == role and _text(msg.get("content")) \
                == text.strip():
            return pos
    return None


def _from_messages(messages: Sequence[dict[str, Any]] | None, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for pos, msg in enumerate(messages or []):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            continue
        text = _text(msg.get("content"))
        if text:
            # No timestamp in the messages: unknown stays unknown (never "now" for history).
            out.append({"id": f"live:{sid}:{pos}", "session": sid, "role": msg["role"],
                        "speaker": msg["role"], "text": text,
                        "timestamp": msg.get("timestamp")})
    return out


def _unseen(mem: Memory, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop turns whose (session, role, text) is stored already (captured by another path)."""
    from tideline.ingest.hermes import unseen_turns

    return unseen_turns(turns, mem.store.agent.session_fingerprints)[0]
