"""A dream run: each layer gathered, planned and applied in turn, and an agent's answer applied.

:func:`run` drives the layers an LLM provider answers (``Memory.dream``);
:func:`apply_answer` applies the answer an agent wrote itself to a prompt it fetched
(``Memory.apply_dream``). Both take the memory's :class:`~tideline.runtime.Runtime`
and arguments the facade has checked with :func:`check_request`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tideline.errors import InvalidInput
from tideline.write.validate import (
    clean_callback,
    clean_flag,
    clean_instance,
    clean_seq,
    clean_text,
)

if TYPE_CHECKING:
    from tideline.dream.plan import CallRecord
    from tideline.dream.providers import Provider
    from tideline.dream.settings import DreamSettings
    from tideline.runtime import Runtime
    from tideline.store.base import Store

__all__ = ["apply_answer", "check_request", "run"]


def check_request(settings: object, dry_run: object, force: object, *,
                  progress: object = None, texts: Sequence[tuple[str, object]] = (),
                  layers: object = None, provider: object = None) -> None:
    """Check the arguments of a dream request before anything is loaded or asked.

    Args:
        settings: None or a :class:`~tideline.dream.settings.DreamSettings`.
        dry_run: a flag.
        force: a flag.
        progress: None or a callable.
        texts: ``(field, value)`` pairs that must be None or non-empty text.
        layers: None, a layer list text, or a sequence of layer names.
        provider: None, a provider name, or an object with a ``complete`` method.

    Raises:
        InvalidInput: an argument of the wrong type or shape.
    """
    from tideline.dream.settings import DreamSettings

    clean_instance(settings, DreamSettings, "settings", "DreamSettings")
    clean_flag(dry_run, "dry_run")
    clean_flag(force, "force")
    clean_callback(progress)
    for field, value in texts:
        if value is not None:
            clean_text(value, field, 4000, required=True)
    if layers is not None and not isinstance(layers, str):
        for layer in clean_seq(layers, "layers"):
            clean_text(layer, "layers", 40, required=True)
    if provider is not None and not isinstance(provider, str) and not callable(
            getattr(provider, "complete", None)):
        raise InvalidInput("provider must be a provider name or instance")


def run(
    rt: Runtime, layers: Sequence[str] | str | None = None, *,
    provider: Provider | str | None = None, model: str | None = None, url: str | None = None,
    command: str | None = None, scope: str | None = None, dry_run: bool = False,
    force: bool = False, settings: DreamSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the dream layers in order; later layers see what earlier ones applied.

    The arguments are those of :meth:`tideline.Memory.dream`, checked with
    :func:`check_request`.

    Returns:
        The run: each layer's result, token and call counts.

    Raises:
        DreamError: no provider configured, unknown layer.
        LLMOutputInvalid: a layer's answer was invalid twice (that layer changed nothing).
        ProviderError: the provider failed.
        DreamTooLarge: a layer would change too much of the store (rerun with force).
        InvalidInput: a malformed scope.
    """
    from tideline.dream.apply import apply_plan
    from tideline.dream.context import gather
    from tideline.dream.errors import DreamError
    from tideline.dream.plan import plan_layer
    from tideline.dream.providers import make_provider
    from tideline.dream.settings import DreamSettings

    overrides: dict[str, Any] = {
        "provider": provider if isinstance(provider, str) else None, "model": model,
        "url": url, "command": command, "layers": layers}
    base = (settings.with_overrides(**overrides) if settings is not None
            else DreamSettings.load(**overrides))
    scope = rt.scope(scope, write=False) if scope is not None else None
    chosen = provider if provider is not None and not isinstance(provider, str) \
        else make_provider(base)
    summary: dict[str, Any] = {"dry_run": dry_run, "provider": chosen.name,
                               "model": chosen.model, "scope": scope, "layers": [],
                               "tokens_in": 0, "tokens_out": 0, "calls": 0}
    touched: set[int] = set()
    applied: list[str] = []
    for layer in base.layers:
        if progress:
            progress(f"{layer}: gathering and asking the model")
        try:
            ctx = gather(rt, layer, base, scope=scope)
            plan = plan_layer(rt, ctx, chosen,
                              journal=lambda rec: _journal_call(rt.store, rec, dry_run))
            result = apply_plan(rt, plan, base, dry_run=dry_run, force=force,
                                touched_before=touched)
        except DreamError as exc:
            rt.store.log_event(None, "dream_error", {"layer": layer, "code": exc.code,
                                                     "error": str(exc)[:500],
                                                     "applied": applied})
            if applied:
                exc.add_note(f"layers applied before the failure: {', '.join(applied)}")
            raise
        touched |= set(result.pop("touched_ids"))
        if result["status"] == "applied":
            applied.append(layer)
        summary["layers"].append(result)
        summary["tokens_in"] += result["tokens_in"]
        summary["tokens_out"] += result["tokens_out"]
        summary["calls"] += result["calls"]
    return summary


def apply_answer(
    rt: Runtime, layer: str, payload: dict[str, Any] | str | bytes, *,
    scope: str | None = None, dry_run: bool = False, force: bool = False,
    settings: DreamSettings | None = None,
) -> dict[str, Any]:
    """Apply a layer's answer written by an agent, checked like a provider's.

    The arguments are those of :meth:`tideline.Memory.apply_dream`, checked with
    :func:`check_request`.

    Returns:
        The layer's result (changes, conflicts, counts).

    Raises:
        LLMOutputInvalid: the payload is invalid (nothing applied).
        DreamTooLarge: it would change too much of the store.
        DreamError: unknown layer.
        InvalidInput: a malformed scope.
    """
    from tideline.dream.apply import apply_plan
    from tideline.dream.context import gather
    from tideline.dream.errors import LLMOutputInvalid
    from tideline.dream.plan import agent_call, interpret, payload_text
    from tideline.dream.prompts import check_layer
    from tideline.dream.settings import DreamSettings

    name = check_layer(layer)
    base = settings or DreamSettings.load()
    scope = rt.scope(scope, write=False) if scope is not None else None
    ctx = gather(rt, name, base, scope=scope)
    ctx.empty = None  # the agent answered; its ids are checked against the store
    value, text, problems = payload_text(payload)
    plan = None
    if not problems:
        plan, problems = interpret(rt, ctx, value, agent=True)
    if problems or plan is None:
        rt.store.log_event(None, "dream_error", {"layer": name, "source": "agent",
                                                 "code": "llm_output_invalid",
                                                 "error": "; ".join(problems[:5])})
        raise LLMOutputInvalid(name, problems)
    call = agent_call(ctx, text)
    _journal_call(rt.store, call, dry_run)
    plan.calls.append(call)
    result = apply_plan(rt, plan, base, dry_run=dry_run, force=force)
    result.pop("touched_ids", None)
    return result


def _journal_call(store: Store, rec: CallRecord, dry_run: bool) -> None:
    """One ``dream_call`` event in its own short transaction (never around the call)."""
    store.log_event(None, "dream_call", rec.data(dry_run))
