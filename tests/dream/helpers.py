"""Helpers for DREAM tests: a loopback LLM server (OpenAI and Anthropic shapes), store dumps."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.backend import rows

from tideline import Memory
from tideline.dream.providers import AnthropicProvider, OpenAIProvider
from tideline.dream.settings import DreamSettings

DEMO = Path(__file__).resolve().parents[2] / "src" / "tideline" / "demo" / "conversation.jsonl"

Reply = str | tuple[int, Any] | Callable[[dict[str, Any]], Any]


@dataclass
class LLMServer:
    """A real HTTP server on 127.0.0.1 that answers with scripted completions.

    ``replies`` are consumed in order: a string is the model's text (wrapped in the
    API's response shape with a usage block), ``(status, body)`` is sent as is, a
    callable gets the request JSON and returns either.
    """

    shape: str
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""
    finish: str | None = None

    def wrap(self, text: str, request: dict[str, Any]) -> dict[str, Any]:
        prompt = json.dumps(request.get("messages", []))
        tokens_in, tokens_out = 1000 + len(prompt) // 10, 100 + len(text) // 10
        if self.shape == "anthropic":
            return {"id": "msg_1", "type": "message", "role": "assistant",
                    "model": request.get("model"), "content": [{"type": "text", "text": text}],
                    "stop_reason": self.finish or "end_turn",
                    "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out}}
        return {"id": "chatcmpl-1", "object": "chat.completion", "model": request.get("model"),
                "choices": [{"index": 0, "finish_reason": self.finish or "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out,
                          "total_tokens": tokens_in + tokens_out}}


def serve(shape: str) -> Iterator[LLMServer]:
    state = LLMServer(shape=shape)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            state.requests.append(request)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            path_ok = self.path.endswith("/v1/messages" if shape == "anthropic"
                                         else "/v1/chat/completions")
            if not path_ok:
                status, body = 404, {"error": {"message": f"no route {self.path}"}}
            elif not state.replies:
                status, body = 500, {"error": {"message": "no scripted reply left"}}
            else:
                reply = state.replies.pop(0)
                if callable(reply):
                    reply = reply(request)
                if isinstance(reply, tuple):
                    status, body = reply
                else:
                    status, body = 200, state.wrap(str(reply), request)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def openai(server: LLMServer, **kw: Any) -> OpenAIProvider:
    """An OpenAI-compatible provider pointed at the loopback server, without backoff waits."""
    return OpenAIProvider(server.url, "test-model", "sk-test-secret", backoff=0.0, **kw)


def anthropic(server: LLMServer, **kw: Any) -> AnthropicProvider:
    """An Anthropic provider pointed at the loopback server."""
    return AnthropicProvider(server.url, "claude-test", "ant-test-secret", backoff=0.0, **kw)


def settings(**kw: Any) -> DreamSettings:
    """Dream settings independent of the environment (the guard floor off unless given)."""
    kw.setdefault("guard_floor", 50)
    return DreamSettings.load(env={}, **kw)


def dump(mem: Memory) -> dict[str, list[tuple[Any, ...]]]:
    """Every row a dream could change: memories, edges, profiles, self-concept, threads."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table, order in (("memories", "id"), ("edges", "src, dst, type"),
                         ("profiles", "entity, facet"), ("self_concept", "facet"),
                         ("threads", "id"), ("vectors", "space, key"),
                         ("write_keys", "key")):
        out[table] = rows(mem, f"SELECT * FROM {table} ORDER BY {order}")  # noqa: S608
    return out


def events(mem: Memory, kind: str) -> list[dict[str, Any]]:
    """Journal events of one kind, oldest first."""
    return [e["data"] for e in reversed(mem.events(kinds=[kind], limit=1000, all_scopes=True))]


def demo_turns() -> list[dict[str, Any]]:
    """The demo conversation (three sessions, 38 turns, several languages)."""
    return [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines() if line]


def answer(value: Any) -> str:
    """A model answer as JSON text."""
    return json.dumps(value, ensure_ascii=False)
