"""Where the dreaming LLM comes from: an HTTP API or any command.

* :class:`OpenAIProvider` — any OpenAI-compatible ``/v1/chat/completions``
  endpoint: OpenAI, vLLM, llama.cpp ``llama-server``, Ollama, LiteLLM, … It asks
  for ``response_format: json_schema`` and falls back to plain text (validated
  all the same) when a server rejects that field.
* :class:`AnthropicProvider` — Anthropic's Messages API (``/v1/messages``).
* :class:`CommandProvider` — a command that reads the prompt on stdin and
  prints the answer on stdout, e.g. ``claude -p`` or ``llm -m …``; its token
  counts are estimated.

httpx is imported on the first request, so Tideline without a provider never
loads it. API keys never appear in an error message or ``repr``.
"""

from __future__ import annotations

import math
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from tideline.dream.errors import DreamError, ProviderError
from tideline.dream.settings import DreamSettings

if TYPE_CHECKING:
    import httpx

__all__ = [
    "AnthropicProvider",
    "CommandProvider",
    "Completion",
    "Message",
    "OpenAIProvider",
    "Provider",
    "endpoint",
    "estimate_tokens",
    "make_provider",
]

SYSTEM = ("You are the consolidating, dreaming mind of a long-term memory. Answer with exactly "
          "one JSON object that matches the schema given in the prompt, and nothing else.")
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_MAX_RETRY_AFTER = 60.0
OPENAI_URL = "https://api.openai.com"
ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Message:
    """One chat message (``user`` or ``assistant``)."""

    role: str
    content: str


@dataclass(frozen=True)
class Completion:
    """One answer of the model.

    Attributes:
        text: the answer as returned.
        tokens_in: prompt tokens (from the response's usage, or estimated).
        tokens_out: answer tokens.
        truncated: the model stopped at its length limit.
        estimated: token counts are estimates (chars / 4), not the provider's figures.
        model: the model that answered, as reported.
    """

    text: str
    tokens_in: int
    tokens_out: int
    truncated: bool = False
    estimated: bool = False
    model: str = ""


class Provider(Protocol):
    """A source of completions."""

    name: str
    model: str

    def complete(self, messages: Sequence[Message], *, schema: dict[str, Any],
                 schema_name: str) -> Completion:
        """Ask the model; ``messages`` alternate user/assistant and end with a user turn.

        Raises:
            ProviderError: the endpoint or command failed.
        """
        ...


def estimate_tokens(text: str) -> int:
    """A rough token count (about four characters per token) for providers that report none."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def endpoint(url: str, path: str) -> str:
    """Turn a base URL into an endpoint: ``http://h:8080``, ``…/v1`` or the full path all work.

    Raises:
        DreamError: not an ``http(s)://host`` URL.
    """
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError as exc:
        raise DreamError(f"invalid provider URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https") or not host:
        raise DreamError("provider URL must look like http(s)://host[:port][/v1]")
    base = parts.path.rstrip("/")
    suffix = path.removeprefix("/v1")
    if not base.endswith(suffix):
        base += suffix if base.endswith("/v1") else path
    return urlunsplit((parts.scheme.lower(), parts.netloc, base, parts.query, ""))


def _shown(url: str) -> str:
    """The URL without user info or query (they may hold secrets)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}{parts.path}"


class _HttpProvider:
    """Shared transport: one client, bounded retries with backoff, scrubbed errors."""

    name = "http"

    def __init__(self, url: str, model: str, api_key: str | None, *, timeout: float,
                 retries: int, backoff: float, max_tokens: int, temperature: float,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not model or not model.strip():
            raise DreamError(f"the {self.name} provider needs a model: set "
                             "TIDELINE_DREAM_MODEL or pass --model")
        self.url = url
        self.model = model.strip()
        self._api_key = api_key or None
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_tokens = int(max_tokens)
        self.temperature = float(temperature)
        self._transport = transport
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={_shown(self.url)!r}, model={self.model!r})"

    def _headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Accept": "application/json"}

    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout, headers=self._headers(),
                                            transport=self._transport)
            return self._client

    def close(self) -> None:
        """Close the connection pool."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _fail(self, message: str) -> ProviderError:
        text = " ".join(f"{self.name} provider at {_shown(self.url)}: {message}".split())
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return ProviderError(text[:400])

    def _post(self, payload: dict[str, Any]) -> tuple[int, Any, str]:
        """POST with bounded retries; returns (status, parsed JSON or None, short error text).

        Raises:
            ProviderError: transport failure after the retries.
        """
        import httpx

        client = self._http()
        attempt = 0
        while True:
            delay = self.backoff * (2 ** attempt)
            try:
                response = client.post(self.url, json=payload)
            except httpx.TransportError as exc:
                if attempt >= self.retries:
                    raise self._fail(f"{type(exc).__name__} after {attempt + 1} attempt(s): "
                                     f"{exc}") from None
            except httpx.HTTPError as exc:
                raise self._fail(f"{type(exc).__name__}: {exc}") from None
            else:
                status = response.status_code
                if status == 200 or status not in _RETRY_STATUS or attempt >= self.retries:
                    try:
                        body = response.json()
                    except ValueError:
                        return status, None, response.text.strip()[:200]
                    return status, body, _error_text(body)
                delay = max(delay, _retry_after(response))
            attempt += 1
            time.sleep(delay)


class OpenAIProvider(_HttpProvider):
    """Any OpenAI-compatible chat-completions endpoint.

    Args:
        url: base URL (default OpenAI's); ``/v1/chat/completions`` is added as needed.
        model: model name (for llama.cpp's server any name works).
        api_key: sent as ``Authorization: Bearer …`` when given.
        timeout: seconds per request.
        retries: extra attempts after a timeout, 408/429/5xx or a lost connection.
        backoff: first retry delay in seconds.
        max_tokens: cap on the answer.
        temperature: sampling temperature.
        json_schema: send ``response_format: json_schema`` (dropped once if the server refuses).
        transport: an ``httpx`` transport (tests).
    """

    name = "openai"

    def __init__(self, url: str | None, model: str, api_key: str | None = None, *,
                 timeout: float = 180.0, retries: int = 2, backoff: float = 1.0,
                 max_tokens: int = 4096, temperature: float = 0.4, json_schema: bool = True,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(endpoint(url or OPENAI_URL, "/v1/chat/completions"), model, api_key,
                         timeout=timeout, retries=retries, backoff=backoff,
                         max_tokens=max_tokens, temperature=temperature, transport=transport)
        self.json_schema = json_schema

    def _headers(self) -> dict[str, str]:
        headers = super()._headers()
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def complete(self, messages: Sequence[Message], *, schema: dict[str, Any],
                 schema_name: str) -> Completion:
        """Ask the endpoint; see :class:`Provider`.

        Raises:
            ProviderError: HTTP error, unusable response or transport failure.
        """
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": SYSTEM}]
            + [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.json_schema:
            payload["response_format"] = {"type": "json_schema", "json_schema": {
                "name": schema_name, "schema": schema, "strict": False}}
        status, body, error = self._post(payload)
        if status == 400 and self.json_schema:
            # Older llama.cpp/Ollama/vLLM builds refuse json_schema; the answer is validated
            # by Tideline anyway, so ask once more without it and remember.
            self.json_schema = False
            payload.pop("response_format")
            status, body, error = self._post(payload)
        if status != 200:
            raise self._fail(f"HTTP {status}{': ' + error if error else ''}")
        try:
            choice = body["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise self._fail("response has no choices[0].message") from None
        text = _content_text(message.get("content")) if isinstance(message, dict) else ""
        if not text and isinstance(message, dict) and message.get("refusal"):
            raise self._fail(f"the model refused: {str(message['refusal'])[:160]}")
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        prompt_chars = sum(len(m.content) for m in messages) + len(SYSTEM)
        tin, tout, estimated = _usage(usage, "prompt_tokens", "completion_tokens",
                                      prompt_chars, text)
        return Completion(text=text, tokens_in=tin, tokens_out=tout,
                          truncated=choice.get("finish_reason") == "length",
                          estimated=estimated, model=str(body.get("model") or self.model))


class AnthropicProvider(_HttpProvider):
    """Anthropic's Messages API.

    Args:
        url: base URL (default ``https://api.anthropic.com``).
        model: model name.
        api_key: sent as ``x-api-key``.
        timeout: seconds per request.
        retries: extra attempts after a timeout, 408/429/5xx/529 or a lost connection.
        backoff: first retry delay in seconds.
        max_tokens: cap on the answer.
        temperature: sampling temperature.
        transport: an ``httpx`` transport (tests).
    """

    name = "anthropic"

    def __init__(self, url: str | None, model: str, api_key: str | None = None, *,
                 timeout: float = 180.0, retries: int = 2, backoff: float = 1.0,
                 max_tokens: int = 4096, temperature: float = 0.4,
                 transport: httpx.BaseTransport | None = None) -> None:
        if not api_key and (url is None or url.rstrip("/").startswith(ANTHROPIC_URL)):
            raise DreamError("the anthropic provider needs an API key: set "
                             "ANTHROPIC_API_KEY or TIDELINE_DREAM_API_KEY")
        super().__init__(endpoint(url or ANTHROPIC_URL, "/v1/messages"), model, api_key,
                         timeout=timeout, retries=retries, backoff=backoff,
                         max_tokens=max_tokens, temperature=temperature, transport=transport)

    def _headers(self) -> dict[str, str]:
        headers = super()._headers()
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def complete(self, messages: Sequence[Message], *, schema: dict[str, Any],
                 schema_name: str) -> Completion:
        """Ask the endpoint; see :class:`Provider`.

        Raises:
            ProviderError: HTTP error, unusable response or transport failure.
        """
        payload = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "system": SYSTEM,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        status, body, error = self._post(payload)
        if status != 200:
            raise self._fail(f"HTTP {status}{': ' + error if error else ''}")
        blocks = body.get("content") if isinstance(body, dict) else None
        if not isinstance(blocks, list):
            raise self._fail("response has no content list")
        text = "".join(str(b.get("text", "")) for b in blocks
                       if isinstance(b, dict) and b.get("type") == "text")
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        prompt_chars = sum(len(m.content) for m in messages) + len(SYSTEM)
        tin, tout, estimated = _usage(usage, "input_tokens", "output_tokens", prompt_chars, text)
        return Completion(text=text, tokens_in=tin, tokens_out=tout,
                          truncated=body.get("stop_reason") == "max_tokens",
                          estimated=estimated, model=str(body.get("model") or self.model))


class CommandProvider:
    """Any command that reads the prompt on stdin and prints the answer on stdout.

    Args:
        command: the command line (split like a POSIX shell would, no shell is run),
            e.g. ``claude -p`` or ``llm -m mistral``.
        timeout: seconds before the command is killed.
        model: a label for the journal (default: the program's name).
    """

    name = "command"

    def __init__(self, command: str | Sequence[str], *, timeout: float = 600.0,
                 model: str | None = None) -> None:
        try:
            argv = shlex.split(command) if isinstance(command, str) else list(command)
        except ValueError as exc:
            raise DreamError(f"cannot parse dream command: {exc}") from None
        if not argv:
            raise DreamError("the command provider needs a command: set "
                             "TIDELINE_DREAM_COMMAND or pass --command")
        self.argv = argv
        self.timeout = float(timeout)
        self.model = model or argv[0].rsplit("/", 1)[-1]

    def __repr__(self) -> str:
        return f"CommandProvider(argv={self.argv!r})"

    def complete(self, messages: Sequence[Message], *, schema: dict[str, Any],
                 schema_name: str) -> Completion:
        """Run the command once with the whole conversation as one prompt on stdin.

        Raises:
            ProviderError: the command is missing, timed out or exited non-zero.
        """
        prompt = _flatten(messages)
        try:
            proc = subprocess.run(  # noqa: S603 - argv comes from the user's own configuration
                self.argv, input=prompt, capture_output=True, text=True, encoding="utf-8",
                errors="replace", timeout=self.timeout, check=False,
            )
        except FileNotFoundError:
            raise ProviderError(f"dream command not found: {self.argv[0]}") from None
        except subprocess.TimeoutExpired:
            raise ProviderError(f"dream command timed out after {self.timeout:g}s: "
                                f"{self.argv[0]}") from None
        except OSError as exc:
            raise ProviderError(f"dream command failed to start: {exc}") from None
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()
            reason = tail[-1][:200] if tail else "no output"
            raise ProviderError(f"dream command exited with status {proc.returncode}: {reason}")
        text = proc.stdout
        return Completion(text=text, tokens_in=estimate_tokens(prompt),
                          tokens_out=estimate_tokens(text), estimated=True, model=self.model)


def make_provider(settings: DreamSettings) -> Provider:
    """Build the provider the settings name.

    Raises:
        DreamError: no provider configured, or one lacks its model, key or command.
    """
    kind = settings.resolved_provider()
    if kind == "command":
        if not settings.command:
            raise DreamError("the command provider needs a command: set "
                             "TIDELINE_DREAM_COMMAND or pass --command")
        return CommandProvider(settings.command, timeout=settings.timeout,
                               model=settings.model)
    common: dict[str, Any] = {"timeout": settings.timeout, "retries": settings.retries,
                              "backoff": settings.backoff, "max_tokens": settings.max_tokens,
                              "temperature": settings.temperature}
    if kind == "anthropic":
        return AnthropicProvider(settings.url, settings.model or "", settings.api_key, **common)
    return OpenAIProvider(settings.url, settings.model or "", settings.api_key, **common)


def _flatten(messages: Sequence[Message]) -> str:
    """One prompt text for a command: the system line, the prompt, then any retry turns."""
    parts = [SYSTEM, ""]
    for m in messages:
        if m.role == "assistant":
            parts += ["--- your previous answer ---", m.content, "--- end ---", ""]
        else:
            parts += [m.content, ""]
    return "\n".join(parts)


def _content_text(content: Any) -> str:
    """``message.content`` as text (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _usage(usage: dict[str, Any], key_in: str, key_out: str, prompt_chars: int,
           text: str) -> tuple[int, int, bool]:
    """Token counts from the response's usage, estimated when absent."""
    tin, tout = usage.get(key_in), usage.get(key_out)
    if isinstance(tin, int) and isinstance(tout, int) and not isinstance(tin, bool):
        return tin, tout, False
    return max(1, math.ceil(prompt_chars / 4)), estimate_tokens(text), True


def _error_text(body: Any) -> str:
    """A short reason from an error body, if it has one."""
    if not isinstance(body, dict):
        return ""
    err = body.get("error")
    msg = err.get("message") if isinstance(err, dict) else err
    msg = msg or body.get("message") or body.get("detail")
    return str(msg)[:200] if msg else ""


def _retry_after(response: httpx.Response) -> float:
    try:
        seconds = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return 0.0
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER) if math.isfinite(seconds) else 0.0
