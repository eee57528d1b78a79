"""Settings of the DREAM layer: the provider, the layers to run, every bound in one place.

Values come from (lowest to highest precedence) the defaults below, the
``TIDELINE_DREAM_*`` environment variables, and explicit keyword overrides
(which the CLI fills from its flags).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tideline.dream.errors import DreamError

__all__ = ["LAYERS", "PROVIDERS", "DreamSettings", "parse_layers"]

#: The DREAM layers, in the order a full dream runs them.
LAYERS = ("solidify", "comb", "wander", "dream")
#: The LLM providers a dream can call.
PROVIDERS = ("openai", "anthropic", "command")


def parse_layers(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """Turn ``"solidify,comb"`` (or a list) into layer names in pipeline order.

    Raises:
        DreamError: an unknown layer name.
    """
    if value is None:
        return LAYERS
    items = value.split(",") if isinstance(value, str) else list(value)
    names = {str(i).strip().lower() for i in items if str(i).strip()}
    unknown = sorted(names - set(LAYERS))
    if unknown:
        raise DreamError(f"unknown layer(s) {', '.join(unknown)}; layers are "
                         f"{', '.join(LAYERS)}")
    return tuple(layer for layer in LAYERS if layer in names)


@dataclass(frozen=True)
class DreamSettings:
    """How to dream.

    Attributes:
        provider: ``openai`` (any OpenAI-compatible endpoint), ``anthropic`` or ``command``;
            None means "infer from url/command, else fail".
        url: base URL of the endpoint (``/v1`` and the path are added when missing).
        model: the model name sent to the endpoint.
        api_key: bearer / x-api-key; never printed.
        command: the command line for the ``command`` provider (prompt on stdin).
        layers: which layers run, in pipeline order.
        timeout: seconds per HTTP request or command run.
        retries: extra transport attempts after a timeout, 408/429/5xx or a lost connection.
        backoff: first retry delay in seconds (doubles).
        max_tokens: cap on the answer's length.
        temperature: sampling temperature sent to HTTP providers.
        max_share: a run may change at most this share of the live memories …
        guard_floor: … unless it changes no more than this many (small stores).
        prompt_chars: budget for the data part of one prompt (solidify batches by it).
        turn_chars: a raw turn longer than this is cut in the prompt (not in the store).
        solidify_unlinked: most memories without source_links shown to solidify.
        comb_memories: most memories shown to comb.
        comb_days: comb looks back this far when it has never run.
        dream_memories: most memories of the day offered to the symbolic dream.
        wander_far: far memories offered to the wander.
        wander_random: random low-attention memories offered to the wander.
        wander_rest_days: a memory that seeded a wander rests this long.
        recent_dreams: dreams shown to comb (the dream feeds the next day's comb).
    """

    provider: str | None = None
    url: str | None = None
    model: str | None = None
    api_key: str | None = dataclasses.field(default=None, repr=False)
    command: str | None = None
    layers: tuple[str, ...] = LAYERS
    timeout: float = 180.0
    retries: int = 2
    backoff: float = 1.0
    max_tokens: int = 4096
    temperature: float = 0.4
    max_share: float = 0.3
    guard_floor: int = 5
    prompt_chars: int = 48_000
    turn_chars: int = 1_500
    solidify_unlinked: int = 20
    comb_memories: int = 60
    comb_days: float = 2.0
    dream_memories: int = 20
    wander_far: int = 5
    wander_random: int = 5
    wander_rest_days: float = 7.0
    recent_dreams: int = 3

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> DreamSettings:
        """Build settings from defaults, ``TIDELINE_DREAM_*`` env vars and overrides.

        Args:
            env: the environment (default ``os.environ``).
            **overrides: field values that win over the environment; ``None`` is ignored.

        Returns:
            The settings.

        Raises:
            DreamError: an unknown setting, layer or provider, or a malformed number.
        """
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name in ("provider", "url", "model", "command"):
            raw = env.get(f"TIDELINE_DREAM_{name.upper()}")
            if raw:
                values[name] = raw.strip()
        if env.get("TIDELINE_DREAM_LAYERS"):
            values["layers"] = env["TIDELINE_DREAM_LAYERS"]
        numbers = {"timeout": float, "retries": int, "max_tokens": int, "max_share": float,
                   "guard_floor": int, "temperature": float, "prompt_chars": int}
        for name, kind in numbers.items():
            raw = env.get(f"TIDELINE_DREAM_{name.upper()}")
            if raw:
                try:
                    values[name] = kind(raw)
                except ValueError:
                    raise DreamError(f"TIDELINE_DREAM_{name.upper()} must be a number, "
                                     f"got {raw!r}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        values = _normalise(values)
        if not values.get("api_key"):
            values["api_key"] = _key_for(values.get("provider"), env)
        settings = cls(**values)
        settings.check()
        return settings

    def with_overrides(self, **overrides: Any) -> DreamSettings:
        """A copy with the given fields replaced (``None`` keeps the current value).

        Raises:
            DreamError: an unknown setting, layer or provider, or a bound out of range.
        """
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        settings = DreamSettings(**_normalise(values))
        settings.check()
        return settings

    def check(self) -> None:
        """Reject values outside their sane range.

        Raises:
            DreamError: a bound is out of range.
        """
        if not 0.0 < self.max_share <= 1.0:
            raise DreamError(f"max_share must be in (0, 1], got {self.max_share}")
        for name in ("timeout", "max_tokens", "prompt_chars", "turn_chars"):
            if not getattr(self, name) > 0:
                raise DreamError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("retries", "guard_floor"):
            if getattr(self, name) < 0:
                raise DreamError(f"{name} must not be negative, got {getattr(self, name)}")

    def resolved_provider(self) -> str:
        """The provider in force: the explicit one, else inferred from command or url.

        Raises:
            DreamError: none is configured.
        """
        if self.provider:
            return self.provider
        if self.command:
            return "command"
        if self.url:
            return "openai"
        raise DreamError(
            "no dream provider configured: set TIDELINE_DREAM_PROVIDER (openai, anthropic or "
            "command) or pass --provider; or dream agent-driven with `tideline dream "
            "--print-prompt LAYER` and `tideline dream apply LAYER FILE`")


def _normalise(values: dict[str, Any]) -> dict[str, Any]:
    """Check names and normalise layers and provider.

    Raises:
        DreamError: an unknown setting, layer or provider.
    """
    known = {f.name for f in dataclasses.fields(DreamSettings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise DreamError(f"unknown dream setting(s) {', '.join(unknown)}")
    values["layers"] = parse_layers(values.get("layers"))
    provider = values.get("provider")
    if provider is not None:
        provider = str(provider).strip().lower()
        if provider not in PROVIDERS:
            raise DreamError(f"unknown provider {provider!r}; use one of {', '.join(PROVIDERS)}")
        values["provider"] = provider
    return values


def _key_for(provider: str | None, env: Mapping[str, str]) -> str | None:
    """The API key from the environment: Tideline's own first, then the vendor's."""
    own = env.get("TIDELINE_DREAM_API_KEY")
    if own:
        return own
    if provider == "anthropic":
        return env.get("ANTHROPIC_API_KEY") or None
    if provider in (None, "openai"):
        return env.get("OPENAI_API_KEY") or None
    return None
