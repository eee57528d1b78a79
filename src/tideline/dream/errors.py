"""Typed errors of the DREAM layer (they extend the tree in :mod:`tideline.errors`)::

    TidelineError
    └── DreamError              a dream could not run or was stopped
        ├── LLMOutputInvalid    the model's answer failed validation twice
        ├── ProviderError       the LLM endpoint or command failed
        └── DreamTooLarge       the run would touch more than the allowed share of the store

Nothing of a layer is applied when any of these is raised for it.
"""

from __future__ import annotations

from tideline.errors import TidelineError

__all__ = ["DreamError", "DreamTooLarge", "LLMOutputInvalid", "ProviderError"]


class DreamError(TidelineError):
    """A dream could not run (no provider configured, unknown layer, …)."""

    code = "dream_error"
    exit_code = 30
    jsonrpc_code = -32040


class LLMOutputInvalid(DreamError):
    """The model's answer was malformed, truncated or broke the layer's schema, twice.

    Attributes:
        layer: the layer whose answer was rejected.
        problems: what was wrong, one entry per finding.
    """

    code = "llm_output_invalid"
    exit_code = 31
    jsonrpc_code = -32041

    def __init__(self, layer: str, problems: list[str], *, attempts: int = 1) -> None:
        shown = "; ".join(problems[:5]) + (f"; … {len(problems) - 5} more"
                                           if len(problems) > 5 else "")
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"{layer}: invalid answer{tries}: {shown}")
        self.layer = layer
        self.problems = list(problems)


class ProviderError(DreamError):
    """The LLM provider failed (HTTP error, timeout, command exit status)."""

    code = "provider_error"
    exit_code = 32
    jsonrpc_code = -32042


class DreamTooLarge(DreamError):
    """The run would change more than the allowed share of the store; rerun with force."""

    code = "dream_too_large"
    exit_code = 33
    jsonrpc_code = -32043
