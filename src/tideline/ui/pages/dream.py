"""Sleep and DREAM: recent sleeps and their metrics; a DREAM plan shown as a readable diff,
approved or rejected item by item, then applied.

A plan is one layer's answer: asked of the configured provider through the real
provider path (journaled ``dream_call``, checked against the layer's schema, retried
once) in a dry run, or an agent's answer to ``tideline dream --print-prompt LAYER`` (the
agent-driven flow), pasted or uploaded as the very file ``tideline dream apply LAYER FILE``
takes — read and checked exactly as that command does (UTF-8, at most 4,000,000
characters, a code fence tolerated, the layer's schema and the ids it names checked by
:meth:`~tideline.Memory.apply_dream` in a dry run). Until "apply", nothing in the store
changes — exactly as the CLI's ``--dry-run`` and ``dream apply``: apply sends the approved
items through
:meth:`~tideline.Memory.apply_dream`, which checks them again and re-checks every
version in its transaction.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tideline.errors import InputTooLarge, InvalidInput, NotFound
from tideline.ui.core import link, redirect

if TYPE_CHECKING:
    from tideline.dream.providers import Completion, Message, Provider
    from tideline.ui.core import UI, View

__all__ = ["Recorder", "filtered", "routes"]

#: Plans kept in the app's memory (the oldest go first).
PLANS_KEPT = 20
#: The most characters of a pasted or uploaded answer (the CLI's `dream apply` limit).
PASTE_CAP = 4_000_000


class Recorder:
    """A provider that passes every call through and keeps the last answer's text."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.texts: list[str] = []

    def complete(self, messages: Sequence[Message], *, schema: dict[str, Any],
                 schema_name: str) -> Completion:
        """Ask the wrapped provider and keep its answer.

        Raises:
            ProviderError: the wrapped provider failed.
        """
        done = self.inner.complete(messages, schema=schema, schema_name=schema_name)
        self.texts.append(done.text)
        return done


def filtered(payload: dict[str, Any], approved: set[str]) -> dict[str, Any]:
    """The answer with only the approved items (``key:index``) of its lists."""
    out: dict[str, Any] = {}
    for key, value in payload.items():
        if isinstance(value, list):
            out[key] = [v for i, v in enumerate(value) if f"{key}:{i}" in approved]
        else:
            out[key] = value
    return out


def items(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Every reviewable item of an answer: its list, index and fields."""
    out = []
    for key, value in payload.items():
        if isinstance(value, list):
            for i, item in enumerate(value):
                fields = item if isinstance(item, dict) else {"value": item}
                out.append({"id": f"{key}:{i}", "group": key, "fields": fields})
    return out


def overview(ui: UI, request: Request) -> Response:
    with ui.lock:
        sleeps = ui.mem.browse.events(kinds=["sleep", "sleep_skipped"], limit=10)
        dreams = ui.mem.browse.events(kinds=["dream_call", "dream_apply", "dream_error"],
                                      limit=10)
    from tideline.dream.settings import LAYERS

    plans = sorted(ui.plans.values(), key=lambda p: -p["created"])
    return ui.page(request, "dream.html", sleeps=sleeps, dreams=dreams, plans=plans,
                   layers=LAYERS)


def _settings(ui: UI) -> Any:
    from tideline.dream.settings import DreamSettings

    return ui.dream_settings or DreamSettings.load()


def _ask(ui: UI, view: View, layer: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ask the provider for ``layer`` in a dry run: (its answer, the diff it would make)."""
    from tideline.dream.providers import make_provider

    settings = _settings(ui)
    recorder = Recorder(make_provider(settings))
    with ui.lock:
        run = ui.mem.dream([layer], provider=recorder, settings=settings, dry_run=True,
                           scope=None if view.all else view.param)
    result = run["layers"][0]
    if not recorder.texts:  # the layer had nothing to work on; no model was asked
        return {}, result
    return json.loads(recorder.texts[-1]), result


def _check(ui: UI, view: View, layer: str, payload: dict[str, Any] | str) -> dict[str, Any]:
    with ui.lock:
        return ui.mem.apply_dream(layer, payload, dry_run=True, settings=_settings(ui),
                                  scope=None if view.all else view.param)


async def _answer(form: Any) -> str | None:
    """The agent's answer of the form: an uploaded file, else the pasted text; ``None``
    when there is neither (then the configured model is asked).

    Raises:
        InvalidInput: the file is not UTF-8 text.
        InputTooLarge: it is over :data:`PASTE_CAP` characters.
    """
    upload = form.get("file")
    if isinstance(upload, UploadFile) and upload.filename:
        # A chosen file is the answer, even an empty one (refused like the CLI refuses it).
        data = await upload.read(4 * PASTE_CAP + 1)  # UTF-8: at most 4 bytes a character
        if len(data) > 4 * PASTE_CAP:
            raise InputTooLarge(f"{upload.filename!r:.200} is over {PASTE_CAP:,} characters")
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{upload.filename!r:.200} is not UTF-8 text") from None
        if len(raw) > PASTE_CAP:
            raise InputTooLarge(f"{upload.filename!r:.200} is over {PASTE_CAP:,} characters")
        return raw
    pasted = str(form.get("payload") or "")
    if len(pasted) > PASTE_CAP:
        raise InputTooLarge(f"the answer is over {PASTE_CAP:,} characters")
    return pasted if pasted.strip() else None


async def plan(ui: UI, request: Request) -> Response:
    form = await ui.form(request, files=1)
    view = ui.view(request)
    from tideline.dream.prompts import check_layer

    layer = check_layer(str(form.get("layer") or ""))
    raw = await _answer(form)

    def work() -> tuple[dict[str, Any], dict[str, Any], str]:
        if raw is not None:
            from tideline.dream.plan import payload_text

            # The CLI's check: the raw text through apply_dream (dry run) raises
            # LLMOutputInvalid for bad JSON, a broken schema or unknown ids.
            diff = _check(ui, view, layer, raw)
            payload, _, problems = payload_text(raw)
            if problems or not isinstance(payload, dict):
                raise InvalidInput("the answer must be a JSON object")
            return payload, diff, "agent"
        payload, diff = _ask(ui, view, layer)
        return payload, diff, "provider"

    payload, diff, source = await run_in_threadpool(work)
    pid = secrets.token_hex(6)
    ui.plans[pid] = {"id": pid, "layer": layer, "payload": payload, "diff": diff,
                     "source": source, "scope": view.param, "created": time.time(),
                     "status": "planned", "result": None}
    for old in sorted(ui.plans.values(), key=lambda p: p["created"])[:-PLANS_KEPT]:
        ui.plans.pop(old["id"], None)
    return redirect(link(f"/dream/plan/{pid}", view))


def _plan(ui: UI, request: Request) -> dict[str, Any]:
    found = ui.plans.get(str(request.path_params["pid"]))
    if found is None:
        raise NotFound("no such plan (plans live until the app stops)")
    return found


def show(ui: UI, request: Request) -> Response:
    from tideline.dream.diff import change_line, layer_text

    held = _plan(ui, request)
    diff = held["diff"]
    lines = [change_line(ch) for ch in diff.get("changes", [])]
    result = layer_text(held["result"]) if held["result"] else ""
    listed = items(held["payload"])
    ids = {v for it in listed for k, v in it["fields"].items()
           if k in ("memory_id", "other_id") and isinstance(v, int) and 0 < v < 2**63}
    view = ui.view(request)
    with ui.lock:
        found = ui.mem.browse.memories_by_id(sorted(ids))
    names = {i: m for i, m in found.items() if view.scopes is None or m.scope in view.scopes}
    return ui.page(request, "plan.html", plan=held, items=listed, names=names,
                   lines=lines, conflicts=diff.get("conflicts", []),
                   notes=diff.get("notes", []), result=result)


async def apply(ui: UI, request: Request) -> Response:
    form = await ui.form(request)
    view = ui.view(request)
    held = _plan(ui, request)
    if held["status"] == "applied":
        raise InvalidInput("this plan was applied already")
    approved = {str(v) for v in form.getlist("item")}
    payload = filtered(held["payload"], approved)
    scope = None if held["scope"] == "*" else held["scope"]

    def work() -> dict[str, Any]:
        with ui.lock:
            return ui.mem.apply_dream(held["layer"], payload, scope=scope,
                                      settings=_settings(ui),
                                      force=form.get("force") == "yes")

    held["result"] = await run_in_threadpool(work)
    held["status"] = "applied"
    held["approved"] = sorted(approved)
    count = len(held["result"].get("changes", []))
    return redirect(link(f"/dream/plan/{held['id']}", view,
                         notice=f"applied {len(approved)} approved item(s): {count} change(s)"))


async def reject(ui: UI, request: Request) -> Response:
    await ui.form(request)
    view = ui.view(request)
    held = _plan(ui, request)
    ui.plans.pop(held["id"], None)
    return redirect(link("/dream", view, notice="plan rejected: nothing changed"))


def routes(ui: UI) -> list[BaseRoute]:
    """The sleep and DREAM pages."""

    async def do_plan(r: Request) -> Response:
        return await plan(ui, r)

    async def do_apply(r: Request) -> Response:
        return await apply(ui, r)

    async def do_reject(r: Request) -> Response:
        return await reject(ui, r)

    return [Route("/dream", lambda r: overview(ui, r), name="dream"),
            Route("/dream/plan", do_plan, methods=["POST"]),
            Route("/dream/plan/{pid}", lambda r: show(ui, r)),
            Route("/dream/plan/{pid}/apply", do_apply, methods=["POST"]),
            Route("/dream/plan/{pid}/reject", do_reject, methods=["POST"])]
