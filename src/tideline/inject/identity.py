"""The identity file (e.g. ``SOUL.md``) that anchors T0.

Looked up as ``$TIDELINE_IDENTITY`` (a file path) or ``<store>/SOUL.md``. The
file is the user's own text; it is still injected fenced as recalled data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ENV_IDENTITY", "IdentityDoc", "identity_path", "read_identity"]

#: The variable naming the identity file (default ``<store>/SOUL.md``).
ENV_IDENTITY = "TIDELINE_IDENTITY"
DEFAULT_NAME = "SOUL.md"
MAX_BYTES = 256 * 1024


@dataclass(frozen=True)
class IdentityDoc:
    """An identity file's path and text (possibly cut at :data:`MAX_BYTES`)."""

    path: Path
    text: str
    truncated: bool = False


def identity_path(home: Path) -> Path:
    """Where the identity file is looked for: ``$TIDELINE_IDENTITY`` or ``<home>/SOUL.md``."""
    env = (os.environ.get(ENV_IDENTITY) or "").strip()
    return Path(env).expanduser() if env else home / DEFAULT_NAME


def read_identity(home: Path) -> IdentityDoc | None:
    """Read the identity file, or None when there is none (or it cannot be read)."""
    path = identity_path(home)
    try:
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError:
        return None
    text = raw[:MAX_BYTES].decode("utf-8", errors="replace").replace("\x00", " ")
    return IdentityDoc(path=path, text=text.strip(), truncated=len(raw) > MAX_BYTES)
