"""Who may reach a served surface: loopback by default, a token beyond it.

The rules ``tideline serve --http`` (MCP) and ``tideline ui`` (the web app) share, in a
module light enough for either to import without the other: any address but loopback
needs a token of at least :data:`MIN_TOKEN_CHARS` characters, read from a file or
``$TIDELINE_MCP_TOKEN`` — never from the command line, which ``ps`` shows to every user.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path

from tideline.errors import InvalidInput

__all__ = ["ENV_TOKEN", "MIN_TOKEN_CHARS", "check_binding", "is_loopback", "read_token"]

ENV_TOKEN = "TIDELINE_MCP_TOKEN"  # noqa: S105 - the variable's name, not a secret
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(token_file: str | Path | None = None,
               env: Mapping[str, str] | None = None) -> str | None:
    """The bearer token: from ``token_file`` when given, else ``$TIDELINE_MCP_TOKEN``.

    Surrounding whitespace (a trailing newline) is dropped. Neither source puts the
    secret into the process's command line.

    Raises:
        InvalidInput: the file cannot be read or holds no token.
    """
    if token_file is not None:
        path = Path(token_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read the token file {path}: {exc}") from exc
        token = text.strip()
        if not token:
            raise InvalidInput(f"the token file {path} is empty")
        return token
    value = ((os.environ if env is None else env).get(ENV_TOKEN) or "").strip()
    return value or None


def check_binding(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token.

    Raises:
        InvalidInput: a non-loopback host without a token, or a token that is too short.
    """
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise InvalidInput(f"the bearer token must have at least {MIN_TOKEN_CHARS} characters")
    if not is_loopback(host) and not token:
        raise InvalidInput(f"listening on {host} (not loopback) requires a bearer token: "
                           f"set {ENV_TOKEN} or pass --token-file")
