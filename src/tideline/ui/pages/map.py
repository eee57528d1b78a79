"""Map: topic clusters, embedding clusters with their adjacency, the attention heatmap and
the entity graph, drawn with the report's own SVG code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tideline.report import svg

if TYPE_CHECKING:
    from tideline.ui.core import UI

__all__ = ["routes"]


def charts(drawn: dict[str, Any]) -> dict[str, Markup]:
    """The heatmap and the cluster map (:meth:`Memory.cluster_map`) as SVG.

    The SVG functions escape every label they draw (stored text stays data).
    """
    grid = drawn["grid"]
    rows = grid["rows"]
    names = [f"#{row['cluster']} {row['label'] or row['scope']}" for row in rows]
    heat = svg.heatmap("attention", "Attention heatmap: recall hits per cluster per day",
                       names, [d[5:] for d in grid["days"]], [row["counts"] for row in rows])
    points = [{"x": p["x"], "y": p["y"], "r": p["r"], "heat": p["heat"],
               "label": f"#{p['id']} [{p['scope']}] {p['label']} — {p['size']} memories, "
                        f"{p['hits']} hits"} for p in drawn["points"]]
    cmap = svg.scatter("clusters", "Embedding clusters (PCA of centroids; size = members, "
                       "red = attention)", points)
    return {"heat": Markup(heat), "cmap": Markup(cmap)}  # noqa: S704 - svg escapes labels


def page(ui: UI, request: Request) -> Response:
    view = ui.view(request)
    with ui.lock:
        topics = ui.mem.topics(scope=None if view.all else view.param, all_scopes=view.all,
                               limit=25)
        drawn = ui.mem.cluster_map(scope=None if view.all else view.param,
                                   all_scopes=view.all, days=30)
        graph = ui.mem.entity_graph(limit=60)
    labels = {p["id"]: f"#{p['id']} {p['label']}" for p in drawn["points"]}
    return ui.page(request, "map.html", topics=topics, charts=charts(drawn),
                   graph=graph, adjacency=drawn["adjacency"], labels=labels)


def routes(ui: UI) -> list[BaseRoute]:
    """The map page."""
    return [Route("/map", lambda r: page(ui, r), name="map")]
