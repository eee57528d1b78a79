"""The self-model: profiles per entity, self-concept and threads, with their input checks.

The facade's verbs (``profiles``, ``update_profile``, …), the sleep step that writes
entity profiles and the dream layers that read them all go through
:class:`SelfModel`, so a profile written by sleep is checked exactly like one written
through the API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tideline.errors import InvalidInput
from tideline.store.cognition import PROFILE_FACETS, SELF_FACETS, CognitionStore
from tideline.write.validate import clean_id, clean_ids, clean_int, clean_name, clean_text

if TYPE_CHECKING:
    from tideline.config import Caps
    from tideline.store.base import Store

__all__ = ["SelfModel"]


class SelfModel:
    """Profiles per entity (fact / impression / relationship), self-concept, threads.

    Args:
        store: the store of the namespace.
        caps: the size caps input is checked against.
    """

    def __init__(self, store: Store, caps: Caps) -> None:
        self.caps = caps
        self._cognition = CognitionStore(store)

    def profiles(self, entity: str | None = None) -> list[dict[str, Any]]:
        """Profile facets, of one entity or of all.

        Raises:
            InvalidInput: a malformed entity name.
        """
        if entity is not None:
            entity = clean_name(entity, "entity", self.caps)
        return self._cognition.profiles(entity)

    def update_profile(self, entity: str, facet: str, content: str, *,
                       expected_version: int | None = None) -> dict[str, Any]:
        """Create or replace one facet of an entity's profile.

        Raises:
            InvalidInput: unknown facet or invalid text.
            Conflict: the stored version differs from ``expected_version``.
        """
        if not isinstance(facet, str) or facet not in PROFILE_FACETS:
            raise InvalidInput(f"facet must be one of {', '.join(PROFILE_FACETS)}")
        return self._cognition.put_profile(
            clean_name(entity, "entity", self.caps), facet,
            clean_text(content, "content", self.caps.field_chars, required=True),
            _version(expected_version))

    def self_concept(self) -> list[dict[str, Any]]:
        """The self-concept facets (fact, terrain, reflection)."""
        return self._cognition.self_concept()

    def update_self_concept(self, facet: str, content: str, *,
                            expected_version: int | None = None) -> dict[str, Any]:
        """Create or replace one self-concept facet.

        Raises:
            InvalidInput: unknown facet or invalid text.
            Conflict: the stored version differs from ``expected_version``.
        """
        if not isinstance(facet, str) or facet not in SELF_FACETS:
            raise InvalidInput(f"facet must be one of {', '.join(SELF_FACETS)}")
        return self._cognition.put_self_concept(
            facet, clean_text(content, "content", self.caps.field_chars, required=True),
            _version(expected_version))

    def threads(self, status: str | None = "open") -> list[dict[str, Any]]:
        """Open (or all, with ``status=None``) threads.

        Raises:
            InvalidInput: ``status`` is not open, closed or None.
        """
        if status is not None and (not isinstance(status, str)
                                   or status not in ("open", "closed")):
            raise InvalidInput("status must be open, closed or None")
        return self._cognition.threads(status)

    def add_thread(self, title: str, body: str = "",
                   source_memories: list[int] | None = None) -> int:
        """Open a thread (an exploration direction); returns its id.

        Raises:
            InvalidInput: invalid title or ids.
        """
        caps = self.caps
        return self._cognition.add_thread(
            clean_text(title, "title", caps.name_chars, required=True),
            clean_text(body, "body", caps.field_chars),
            list(clean_ids(source_memories, "source_memories", caps.source_links)))

    def close_thread(self, thread_id: int) -> None:
        """Close a thread.

        Raises:
            NotFound: no such thread.
        """
        self._cognition.close_thread(clean_id(thread_id, "thread_id"))


def _version(value: object) -> int | None:
    return None if value is None else clean_int(value, "expected_version", lo=0)
