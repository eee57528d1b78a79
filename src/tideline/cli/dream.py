"""DREAM commands: ``tideline dream`` (after a sleep), ``--print-prompt`` and ``dream apply``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tideline.cli.base import app, emit, guarded
from tideline.cli.commands import EmbOpt, JsonOpt, NsOpt, StoreOpt, opened

dream_app = typer.Typer(
    help="DREAM: LLM consolidation — solidify, comb, wander, dream.",
    invoke_without_command=True, no_args_is_help=False,
)
app.add_typer(dream_app, name="dream")

DreamScopeOpt = Annotated[str | None, typer.Option(
    "--scope", help="Dream about one project (with global); default every scope.")]
DryOpt = Annotated[bool, typer.Option("--dry-run", help="Print the diff; change nothing.")]
ForceOpt = Annotated[bool, typer.Option(
    "--force", help="Apply even if a layer would change more than the allowed share.")]


@dream_app.callback()
@guarded
def dream(
    ctx: typer.Context,
    layers: Annotated[str | None, typer.Option(
        "--layers", help="Comma-separated: solidify,comb,wander,dream (default "
        "$TIDELINE_DREAM_LAYERS or all).")] = None,
    provider: Annotated[str | None, typer.Option(
        "--provider", help="openai (any OpenAI-compatible endpoint), anthropic or command.")
    ] = None,
    command: Annotated[str | None, typer.Option(
        "--command", help="Command that reads the prompt on stdin, e.g. 'claude -p'.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="Endpoint base URL.")] = None,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", help="Seconds per model call.")] = None,
    print_prompt: Annotated[str | None, typer.Option(
        "--print-prompt", metavar="LAYER", help="Print a layer's filled prompt and exit.")
    ] = None,
    no_sleep: Annotated[bool, typer.Option(
        "--no-sleep", help="Do not run a sleep first.")] = False,
    dry_run: DryOpt = False, force: ForceOpt = False,
    store: StoreOpt = None, namespace: NsOpt = None, scope: DreamScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Consolidate with an LLM: solidify the day's conversation, comb, wander and dream.

    Runs a sleep first (unless --no-sleep or --dry-run), then each layer: build the
    prompt, ask the model, check its answer, apply it in one transaction.
    """
    if ctx.invoked_subcommand is not None:
        return
    from tideline.dream.prompts import render_prompt
    from tideline.dream.settings import DreamSettings

    settings = DreamSettings.load(provider=provider, command=command, model=model, url=url,
                                  timeout=timeout, layers=layers)
    if print_prompt is None:
        from tideline.dream.providers import make_provider

        # A dream that cannot ask a model fails here, before the sleep and its backup.
        make_provider(settings)
    with opened(store, namespace, embedder) as mem:
        if print_prompt is not None:
            prompt = render_prompt(mem, print_prompt, scope=scope, settings=settings)
            if as_json:
                emit({"layer": print_prompt, "prompt": prompt}, True)
            else:  # verbatim: an agent pipes this into its own model
                sys.stdout.write(prompt + "\n")
            return
        slept: dict[str, Any] | None = None
        if not no_sleep and not dry_run:  # a dry run changes nothing, a sleep would
            _say("sleeping first", as_json)
            slept = mem.sleep(progress=lambda step: _say(f"sleep: {step}", as_json))
        run = mem.dream(settings=settings, scope=scope, dry_run=dry_run, force=force,
                        progress=None if as_json else lambda line: _say(line, as_json))
    if slept is not None:
        run["sleep"] = slept

    def text() -> str:
        from tideline.dream.diff import run_text

        head = ""
        if slept is not None:
            head = ("sleep: skipped — " + str(slept.get("reason", "nothing changed"))
                    if slept.get("skipped") else "sleep: done") + "\n"
        return head + run_text(run)

    emit(run, as_json, text)


@dream_app.command("apply")
@guarded
def dream_apply(
    layer: Annotated[str, typer.Argument(help="solidify, comb, wander or dream.")],
    file: Annotated[str, typer.Argument(help="The answer as a JSON file ('-' for stdin).")],
    dry_run: DryOpt = False, force: ForceOpt = False,
    store: StoreOpt = None, namespace: NsOpt = None, scope: DreamScopeOpt = None,
    embedder: EmbOpt = None, as_json: JsonOpt = False,
) -> None:
    """Apply an agent's answer to a layer's prompt (agent-driven dreaming)."""
    from tideline.errors import InputTooLarge, InvalidInput

    limit = 4_000_000
    if file == "-":
        raw = sys.stdin.read(limit + 1)
    else:
        path = Path(file)
        try:
            with path.open(encoding="utf-8") as fh:
                raw = fh.read(limit + 1)
        except UnicodeDecodeError:
            raise InvalidInput(f"{file!r:.200} is not UTF-8 text") from None
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            detail = getattr(exc, "strerror", None) or exc
            raise InvalidInput(f"cannot read {file!r:.200}: {detail}") from None
    if len(raw) > limit:
        raise InputTooLarge(f"{file} is over {limit:,} characters")
    with opened(store, namespace, embedder) as mem:
        result = mem.apply_dream(layer, raw, scope=scope, dry_run=dry_run, force=force)

    def text() -> str:
        from tideline.dream.diff import layer_text

        return layer_text(result)

    emit(result, as_json, text)


def _say(line: str, quiet: bool) -> None:
    if not quiet:
        sys.stderr.write(f"tideline: {line}\n")
        sys.stderr.flush()
