"""The part of a query that is not a name: what a question asks *about* a person.

Every stored turn is embedded with its speaker ("Melanie: we went camping"), and a
question about a person names them ("What activities does Melanie do?"). The query
vector then sits near every turn that carries the name — her short replies, the other
speaker's "Hey Mel!" — and ranks what she actually did by how much it resembles her
name rather than by "activities". Recall therefore ranks turns by the query vector
with the named people's own vectors taken out::

    focus = normalize(q − name_focus · Σ embed_passage(name))

(one passage embedding per name, computed once and cached), gathers candidates with
it too, so a person's turns from every session compete on the rest of the question,
and ranks each turn by half its plain cosine and half its (rescaled) focus cosine
(:func:`blend`). Who is named is decided by :func:`tideline.recall.people.named_people`
(speakers of stored turns and ``known_persons``, short forms resolved); the speaker
boost still favours the named person's turns, and abstention still reads the plain
query's cosines.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

import numpy as np

from tideline.embed.guard import EmbedGuard

__all__ = ["NameVectors", "blend", "focus_vector"]

_CACHE = 1_024


class NameVectors:
    """Passage embeddings of people's names, computed once per name and kept."""

    def __init__(self, guard: EmbedGuard) -> None:
        self.guard = guard
        self._vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def of(self, names: Iterable[str]) -> list[np.ndarray] | None:
        """The vectors of ``names``, or None when the embedder cannot give them.

        Raises:
            Nothing: an unavailable embedder yields None (recall then ranks as usual).
        """
        wanted = sorted(set(names))
        with self._lock:
            missing = [n for n in wanted if n not in self._vectors]
        if missing:
            got = self.guard.passages(missing)
            if got is None:
                return None
            with self._lock:
                if len(self._vectors) + len(missing) > _CACHE:
                    self._vectors.clear()
                for name, vec in zip(missing, got, strict=True):
                    self._vectors[name] = np.asarray(vec, dtype=np.float32)
        with self._lock:
            found = [self._vectors.get(n) for n in wanted]
        return [v for v in found if v is not None] if all(v is not None for v in found) else None


def focus_vector(query: np.ndarray, names: list[np.ndarray], share: float) -> np.ndarray | None:
    """The query vector with ``share`` of each name's vector taken out, unit length.

    Args:
        query: the query's embedding.
        names: the named people's name vectors.
        share: how much of each name vector to remove (``name_focus``).

    Returns:
        The focus vector, or None when there is nothing to remove or nothing is left.
    """
    if share <= 0 or not names or not query.any():
        return None
    out = query.astype(np.float32) - share * np.sum(np.stack(names), axis=0)
    norm = float(np.linalg.norm(out))
    return (out / norm).astype(np.float32) if norm > 1e-6 else None


def blend(plain: Mapping[int, float], focused: Mapping[int, float]) -> dict[int, float]:
    """The similarity recall ranks a turn by: half its plain cosine, half its focus cosine.

    The focus vector lacks the name's share of every similarity, so its cosines sit
    lower across the board; they are first shifted so that their mean over the
    candidates matches the plain cosines' mean, which keeps the semantic part on the
    scale the keyword and lexical evidence, the boosts and the memories are weighed
    against. Half of the plain cosine stays: the name still says something (a turn
    that tells of the person by name), only no longer everything.

    Args:
        plain: cosine of each candidate to the query.
        focused: cosine of each candidate to the focus vector (same keys).

    Returns:
        The blended similarity of each key in both.
    """
    keys = [k for k in focused if k in plain]
    if not keys:
        return {}
    lift = float(np.mean([plain[k] for k in keys]) - np.mean([focused[k] for k in keys]))
    return {k: 0.5 * (plain[k] + focused[k] + lift) for k in keys}
