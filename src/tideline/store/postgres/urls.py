"""A PostgreSQL store's URL: whether a value is one, and how to show it without its
password. Light (no driver): the store's factory and the archive ask it first."""

from __future__ import annotations

__all__ = ["SCHEMES", "is_database_url", "redact_url"]

#: The URL prefixes that name a PostgreSQL database.
SCHEMES = ("postgresql://", "postgres://")


def is_database_url(value: str | None) -> bool:
    """Whether ``value`` names a PostgreSQL database (rather than a store directory)."""
    return bool(value) and str(value).lower().startswith(SCHEMES)


def redact_url(url: str) -> str:
    """The URL without its password (for messages and introspection)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = f"{parts.username or ''}:***@{parts.hostname or ''}"
        netloc += f":{parts.port}" if parts.port else ""
    except ValueError:
        return "postgresql://…"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
