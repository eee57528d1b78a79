"""Every threshold and size of the injection tiers, in one typed object.

Defaults follow the Tideline seed (T2 weight > 0.6 top 3, 25 clusters, T1 cosine
floor, T4 when T1 brings fewer than 2). Each field can be overridden with an
environment variable ``TIDELINE_INJECT_<FIELD>`` (upper case), e.g.
``TIDELINE_INJECT_BRIEF_TOKENS=3000`` or ``TIDELINE_INJECT_T1_FLOOR=0.82``.

The T1 cosine floor is relative to the embedder: by default it is the
embedder profile's ``floor`` (e5's cosines are anisotropic — unrelated texts
score ~0.8 — so the seed's 0.25 would let everything through). Set
``t1_floor`` to force an absolute value.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tideline.errors import InvalidInput

__all__ = ["ENV_PREFIX", "InjectTuning"]

#: Every injection setting can be set as ``TIDELINE_INJECT_<FIELD>``.
ENV_PREFIX = "TIDELINE_INJECT_"


@dataclass(frozen=True)
class InjectTuning:
    """Knobs of the injection tiers (all overridable by ``TIDELINE_INJECT_*``).

    Attributes:
        brief_tokens: token budget of the whole session brief (T0/T2/T2b/T3).
        prefetch_tokens: token budget of the whole per-prompt block (T1/T4).
        t0_identity_tokens: cap on the identity file's share of T0.
        t1_floor: absolute cosine floor for T1; None = a threshold of the embedder's profile.
        t1_floor_from: which profile threshold T1 uses when ``t1_floor`` is None:
            ``floor`` (default; candidates below it are noise) or ``abstain`` (stricter:
            the similarity at which recall trusts a hit).
        t1_limit: T1 semantic hits at most.
        t1_recent_turns: turns of recent context in T1.
        t2_min_weight: T2 takes memories whose weight is above this (the seed's 0.6).
        t2_top: T2 takes at most this many memories above ``t2_min_weight``.
        t2_fill: while fewer than ``t2_top`` pass the threshold, T2 is filled up to this
            many with the store's highest-weight memories in scope, whatever their weight
            (the top of the store, relative to what it holds: a young store's brief
            carries its few memories); 0 keeps the seed's strict threshold.
        t2b_window_hours: "the most recent day" of raw texture for T2b.
        t2b_turns: T2b shows at most this many turns of its one session.
        t2b_turn_chars: each T2b turn is cut to this many characters.
        t3_clusters: T3 lists at most this many clusters (or tags).
        t3_profiles: T3 lists at most this many profile facets.
        t4_trigger: T4 runs when T1 brings fewer than this many items.
        t4_limit: T4 hits at most.
        item_chars: one recalled item is cut to this many characters.
    """

    brief_tokens: int = 2000
    prefetch_tokens: int = 800
    t0_identity_tokens: int = 600
    t1_floor: float | None = None
    t1_floor_from: str = "floor"
    t1_limit: int = 5
    t1_recent_turns: int = 2
    t2_min_weight: float = 0.6
    t2_top: int = 3
    t2_fill: int = 5
    t2b_window_hours: float = 24.0
    t2b_turns: int = 12
    t2b_turn_chars: int = 400
    t3_clusters: int = 25
    t3_profiles: int = 12
    t4_trigger: int = 2
    t4_limit: int = 5
    item_chars: int = 600

    def __post_init__(self) -> None:
        if self.t1_floor_from not in ("floor", "abstain"):
            raise InvalidInput(f"t1_floor_from must be floor or abstain, got "
                               f"{self.t1_floor_from!r}")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or f.name == "t1_floor_from":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidInput(f"inject setting {f.name} must be a number, got {value!r}")
            if value < 0:
                raise InvalidInput(f"inject setting {f.name} must not be negative, got {value}")
        if self.t1_floor is not None and not -1.0 <= self.t1_floor <= 1.0:
            raise InvalidInput(f"t1_floor must lie in [-1, 1], got {self.t1_floor}")

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> InjectTuning:
        """Defaults, then ``TIDELINE_INJECT_*`` variables, then keyword overrides.

        Raises:
            InvalidInput: an unknown setting or a value that is not a number.
        """
        environ = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = (environ.get(ENV_PREFIX + f.name.upper()) or "").strip()
            if not raw:
                continue
            if f.name == "t1_floor" and raw.lower() in ("none", "auto", "profile"):
                values[f.name] = None
                continue
            if f.name == "t1_floor_from":
                values[f.name] = raw.lower()
                continue
            values[f.name] = _number(raw, ENV_PREFIX + f.name.upper(), f.name == "t1_floor"
                                     or "weight" in f.name or "hours" in f.name)
        known = {f.name for f in dataclasses.fields(cls)}
        for key, value in overrides.items():
            if key not in known:
                raise InvalidInput(f"unknown inject setting {key!r}")
            if value is not None:
                values[key] = value
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def _number(raw: str, name: str, real: bool) -> float | int:
    try:
        return float(raw) if real else int(raw)
    except ValueError as exc:
        kind = "a number" if real else "an integer"
        raise InvalidInput(f"{name} must be {kind}, got {raw!r}") from exc
