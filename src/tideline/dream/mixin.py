"""The facade's verbs for dream: mixed into :class:`tideline.Memory`."""

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
    from tideline.memory import Memory

__all__ = ["DreamMixin"]


class DreamMixin:
    """DREAM: LLM consolidation (solidify, comb, wander, dream)."""

    def dream(
        self,
        layers: Sequence[str] | str | None = None,
        *,
        provider: Provider | str | None = None,
        model: str | None = None,
        url: str | None = None,
        command: str | None = None,
        scope: str | None = None,
        dry_run: bool = False,
        force: bool = False,
        settings: DreamSettings | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Consolidate with an LLM: solidify, comb, wander and the symbolic dream.

        Each layer is planned (prompt built, model asked, answer checked — no lock
        held) and then applied in one short transaction that re-checks versions;
        later layers see what earlier ones applied. Every model call is journaled
        as ``dream_call``, every applied layer as ``dream_apply``.

        Args:
            layers: which layers to run (names or ``"solidify,comb"``); default from
                ``TIDELINE_DREAM_LAYERS``, else all four.
            provider: ``openai``, ``anthropic``, ``command`` or a provider instance;
                default from ``TIDELINE_DREAM_PROVIDER``.
            model: the model name (HTTP providers).
            url: the endpoint's base URL.
            command: the command line (``command`` provider).
            scope: dream about one project (with ``global``); default every scope.
            dry_run: show what would change; change nothing.
            force: apply even when a layer would change more than the allowed share.
            settings: all dream settings at once (the other arguments override it).
            progress: called with a short line before each layer.

        Returns:
            ``{"layers": [...], "tokens_in", "tokens_out", "calls", "dry_run", …}``; each
            layer lists its changes, conflicts (skipped changes) and counts.

        Raises:
            DreamError: no provider configured, unknown layer.
            LLMOutputInvalid: a layer's answer was invalid twice (that layer changed nothing).
            ProviderError: the provider failed.
            DreamTooLarge: a layer would change too much of the store (rerun with force).
        """
        from tideline.dream.apply import apply_plan
        from tideline.dream.context import gather
        from tideline.dream.errors import DreamError
        from tideline.dream.plan import plan_layer
        from tideline.dream.providers import make_provider
        from tideline.dream.settings import DreamSettings

        mem: Memory = self  # type: ignore[assignment]
        _check_common(settings, dry_run, force)
        clean_callback(progress)
        for field, value in (("model", model), ("url", url), ("command", command)):
            if value is not None:
                clean_text(value, field, 4000, required=True)
        if layers is not None and not isinstance(layers, str):
            for layer in clean_seq(layers, "layers"):
                clean_text(layer, "layers", 40, required=True)
        if provider is not None and not isinstance(provider, str) and not callable(
                getattr(provider, "complete", None)):
            raise InvalidInput("provider must be a provider name or instance")
        overrides: dict[str, Any] = {
            "provider": provider if isinstance(provider, str) else None, "model": model,
            "url": url, "command": command, "layers": layers}
        base = (settings.with_overrides(**overrides) if settings is not None
                else DreamSettings.load(**overrides))
        scope = mem._scope(scope, write=False) if scope is not None else None
        chosen = provider if provider is not None and not isinstance(provider, str) \
            else make_provider(base)
        run: dict[str, Any] = {"dry_run": dry_run, "provider": chosen.name,
                               "model": chosen.model, "scope": scope, "layers": [],
                               "tokens_in": 0, "tokens_out": 0, "calls": 0}
        touched: set[int] = set()
        applied: list[str] = []
        for layer in base.layers:
            if progress:
                progress(f"{layer}: gathering and asking the model")
            try:
                ctx = gather(mem, layer, base, scope=scope)
                plan = plan_layer(mem, ctx, chosen,
                                  journal=lambda rec: _journal_call(mem, rec, dry_run))
                result = apply_plan(mem, plan, base, dry_run=dry_run, force=force,
                                    touched_before=touched)
            except DreamError as exc:
                mem.store.log_event(None, "dream_error", {"layer": layer, "code": exc.code,
                                                          "error": str(exc)[:500],
                                                          "applied": applied})
                if applied:
                    exc.add_note(f"layers applied before the failure: {', '.join(applied)}")
                raise
            touched |= set(result.pop("touched_ids"))
            if result["status"] == "applied":
                applied.append(layer)
            run["layers"].append(result)
            run["tokens_in"] += result["tokens_in"]
            run["tokens_out"] += result["tokens_out"]
            run["calls"] += result["calls"]
        return run

    def apply_dream(
        self,
        layer: str,
        payload: dict[str, Any] | str | bytes,
        *,
        scope: str | None = None,
        dry_run: bool = False,
        force: bool = False,
        settings: DreamSettings | None = None,
    ) -> dict[str, Any]:
        """Apply a layer's answer written by an agent (agent-driven dreaming).

        The agent fetched the prompt (``tideline dream --print-prompt LAYER`` or the
        MCP prompt) and answered it itself. The answer is checked exactly like a
        provider's — schema, ids (against the store), turns, scopes — and applied
        in one transaction that re-checks versions: copy the ``vN`` the prompt
        showed into ``version`` fields to be protected against changes made
        meanwhile. Journaled as ``dream_call`` (provider ``agent``, estimated
        tokens) and ``dream_apply``.

        Args:
            layer: ``solidify``, ``comb``, ``wander`` or ``dream``.
            payload: the answer, as a dict or JSON text.
            scope: the project the prompt was rendered for (None: every scope).
            dry_run: show what would change; change nothing.
            force: apply even past the share guard.
            settings: dream settings (bounds, guard); default from the environment.

        Returns:
            The layer's result (changes, conflicts, counts).

        Raises:
            LLMOutputInvalid: the payload is invalid (nothing applied).
            DreamTooLarge: it would change too much of the store.
            DreamError: unknown layer.
        """
        from tideline.dream.apply import apply_plan
        from tideline.dream.context import gather
        from tideline.dream.errors import LLMOutputInvalid
        from tideline.dream.plan import agent_call, interpret, payload_text
        from tideline.dream.prompts import check_layer
        from tideline.dream.settings import DreamSettings

        mem: Memory = self  # type: ignore[assignment]
        _check_common(settings, dry_run, force)
        if not isinstance(payload, dict | str | bytes):
            raise InvalidInput("payload must be the answer as JSON text or a dict")
        if not isinstance(layer, str):
            raise InvalidInput("layer must be solidify, comb, wander or dream")
        name = check_layer(layer)
        base = settings or DreamSettings.load()
        scope = mem._scope(scope, write=False) if scope is not None else None
        ctx = gather(mem, name, base, scope=scope)
        ctx.empty = None  # the agent answered; its ids are checked against the store
        value, text, problems = payload_text(payload)
        plan = None
        if not problems:
            plan, problems = interpret(mem, ctx, value, agent=True)
        if problems or plan is None:
            mem.store.log_event(None, "dream_error", {"layer": name, "source": "agent",
                                                      "code": "llm_output_invalid",
                                                      "error": "; ".join(problems[:5])})
            raise LLMOutputInvalid(name, problems)
        call = agent_call(ctx, text)
        _journal_call(mem, call, dry_run)
        plan.calls.append(call)
        result = apply_plan(mem, plan, base, dry_run=dry_run, force=force)
        result.pop("touched_ids", None)
        return result


def _check_common(settings: object, dry_run: object, force: object) -> None:
    from tideline.dream.settings import DreamSettings

    clean_instance(settings, DreamSettings, "settings", "DreamSettings")
    clean_flag(dry_run, "dry_run")
    clean_flag(force, "force")


def _journal_call(mem: Memory, rec: CallRecord, dry_run: bool) -> None:
    """One ``dream_call`` event in its own short transaction (never around the call)."""
    mem.store.log_event(None, "dream_call", rec.data(dry_run))
