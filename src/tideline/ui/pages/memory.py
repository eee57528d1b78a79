"""A memory: every field, its revisions, its edges as links, its source turns opened as the
raw conversation around each; and the actions on it (revise, forget, reflect)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tideline.errors import InvalidInput, NotFound
from tideline.models import MemoryRecord
from tideline.ui.core import link, number, redirect

if TYPE_CHECKING:
    from tideline.ui.core import UI, View

__all__ = ["routes"]

#: Turns shown on each side of a linked turn.
RADIUS = 2
#: The most linked turns opened on one page.
LINKED_CAP = 20


def _id(request: Request) -> int:
    raw = str(request.path_params["mid"])
    value = number(raw)
    if not value:
        raise NotFound(f"no memory with id {raw[:40]}")
    return value


def visible(ui: UI, view: View, mid: int) -> MemoryRecord:
    """The memory if the page's project may see it.

    Raises:
        NotFound: no such memory in the namespace, or not visible to the project.
    """
    with ui.lock:
        rec = ui.mem.browse.memory(mid)
    if rec is None or (view.scopes is not None and rec.scope not in view.scopes):
        raise NotFound(f"no memory with id {mid} in {view.label}")
    return rec


def page(ui: UI, request: Request) -> Response:
    view = ui.view(request)
    rec = visible(ui, view, _id(request))
    with ui.lock:
        shown = ui.mem.show(rec.id, scope=rec.scope)
        texture: list[dict[str, Any]] = []
        for turn in shown["turns"][:LINKED_CAP]:
            around = ui.mem.browse.session_turns(
                turn["session"], scopes=view.scopes,
                from_index=max(0, int(turn["turn_index"]) - RADIUS), limit=2 * RADIUS + 1)
            texture.append({"turn": turn, "around": around})
        ends = {e["src"] for e in shown["edges"]} | {e["dst"] for e in shown["edges"]}
        names = ui.mem.browse.memories_by_id(sorted(ends - {rec.id}))
    edges = [{**e, "other": e["dst"] if e["src"] == rec.id else e["src"],
              "direction": "→" if e["src"] == rec.id else "←"} for e in shown["edges"]]
    return ui.page(request, "memory.html", m=shown, rec=rec, edges=edges, names=names,
                   texture=texture, confirm=request.query_params.get("confirm") == "forget")


async def revise(ui: UI, request: Request) -> Response:
    form = await ui.form(request)
    view = ui.view(request)
    mid = _id(request)
    text = str(form.get("gesture") or "").strip()
    fields: dict[str, Any] = {}
    for name in ("context", "cognition_direction", "entities_role"):
        if name in form:
            fields[name] = str(form[name])
    if "tags" in form:
        fields["tags"] = [t.strip() for t in str(form["tags"]).split(",") if t.strip()]
    for name in ("importance", "emotional", "recurrence", "unresolved"):
        raw = str(form.get(name) or "").strip()
        if raw:
            value = number(raw)
            if value is None:
                raise InvalidInput(f"{name} must be 1–5")
            fields[name] = value

    def work() -> int:
        rec = visible(ui, view, mid)
        with ui.lock:
            return ui.mem.revise(mid, text or None, scope=view.act_scope(rec.scope),
                                 **fields).id

    new_id = await run_in_threadpool(work)
    return redirect(link(f"/memory/{new_id}", view, notice=f"revised #{mid} → #{new_id}"))


async def forget(ui: UI, request: Request) -> Response:
    form = await ui.form(request)
    view = ui.view(request)
    mid = _id(request)
    if form.get("confirm") != "yes":
        return redirect(link(f"/memory/{mid}", view, confirm="forget"))

    def work() -> None:
        rec = visible(ui, view, mid)
        with ui.lock:
            ui.mem.forget(mid, scope=view.act_scope(rec.scope))

    await run_in_threadpool(work)
    return redirect(link("/", view, notice=f"forgot #{mid}: deleted for real"))


async def reflect(ui: UI, request: Request) -> Response:
    form = await ui.form(request)
    view = ui.view(request)
    mid = _id(request)
    reward = {"up": 1.0, "down": -1.0}.get(str(form.get("reward")))
    if reward is None:
        raise InvalidInput("reward must be up or down")

    def work() -> Mapping[str, Any]:
        rec = visible(ui, view, mid)
        with ui.lock:
            return ui.mem.reflect([mid], reward, scope=view.act_scope(rec.scope))

    await run_in_threadpool(work)
    sign = "+" if reward > 0 else "−"
    return redirect(link(f"/memory/{mid}", view, notice=f"reflected {sign} on #{mid}"))


def routes(ui: UI) -> list[BaseRoute]:
    """The memory page and its actions."""

    async def do_revise(r: Request) -> Response:
        return await revise(ui, r)

    async def do_forget(r: Request) -> Response:
        return await forget(ui, r)

    async def do_reflect(r: Request) -> Response:
        return await reflect(ui, r)

    return [
        Route("/memory/{mid}", lambda r: page(ui, r), name="memory"),
        Route("/memory/{mid}/revise", do_revise, methods=["POST"]),
        Route("/memory/{mid}/forget", do_forget, methods=["POST"]),
        Route("/memory/{mid}/reflect", do_reflect, methods=["POST"]),
    ]
