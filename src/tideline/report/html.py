"""The report as one self-contained HTML file with plots (no network, no CDN).

Charts are inline SVG drawn here (:mod:`tideline.report.svg`); the page's small
script (``report.js``, inlined) adds tooltips, highlighting and a table of
contents, and marks the page ``data-rendered`` when it has run. The report's
JSON is embedded too, with every ``<`` escaped so that no stored text can close
the script tag.
Every memory text is HTML-escaped: stored content is data, never markup.
"""

from __future__ import annotations

import json
import re
from html import escape
from importlib import resources
from typing import Any

from tideline.report import svg

__all__ = ["render_html"]


def _asset(name: str) -> str:
    return resources.files("tideline.report").joinpath(name).read_text(encoding="utf-8")


def _table(head: list[str], rows: list[list[Any]], cls: str = "") -> str:
    if not rows:
        return '<p class="empty">—</p>'
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f'<table class="{escape(cls)}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _section(sid: str, title: str, *parts: str) -> str:
    return f'<section id="{sid}"><h2>{escape(title)}</h2>{"".join(parts)}</section>'


def _short_days(days: list[str]) -> list[str]:
    return [d[5:] for d in days]


def _charts(r: dict[str, Any]) -> dict[str, str]:
    g = r["growth"]
    x = list(range(len(g["days"])))
    growth = svg.lines(
        "growth", "Memories over time (cumulative, by kind)",
        {k: list(zip(x, v, strict=True)) for k, v in g["cumulative_by_kind"].items()},
        y_label="memories", x_labels=_short_days(g["days"]))
    gate = svg.bars("gate", "Novelty-gate decisions per day", _short_days(r["gate"]["days"]),
                    r["gate"]["series"], y_label="writes")
    days = r["recall"]["by_day"]
    latency = svg.lines(
        "latency", "Recall latency per day (ms)",
        {"p50": [(i, d["p50_ms"]) for i, d in enumerate(days) if d["p50_ms"] is not None],
         "p95": [(i, d["p95_ms"]) for i, d in enumerate(days) if d["p95_ms"] is not None]},
        y_label="ms", x_labels=_short_days([d["day"] for d in days]))
    recalls = svg.bars(
        "recalls", "Recalls per day (answered / abstained)", _short_days([d["day"] for d in days]),
        {"answered": [d["count"] - d["abstained"] for d in days],
         "abstained": [d["abstained"] for d in days]}, y_label="recalls")
    snaps = r["retention"]["snapshots"]
    across = svg.lines(
        "retention-sleeps", "Retention across sleeps (live memories)",
        {q: [(i, s[q]) for i, s in enumerate(snaps)] for q in ("p90", "mean", "p50", "p10")},
        x_label="sleep #", y_label="retention", y_max=1.0,
        hline=(r["fading"]["dormant_below"], "dormant floor"))
    model = svg.lines(
        "retention-model", "Retention model (one memory, by reinforcement history)",
        {k: [tuple(p) for p in v] for k, v in r["retention"]["model"].items()},
        x_label="days", y_label="retention", y_max=1.0,
        hline=(r["fading"]["dormant_below"], "dormant floor"))
    hist = r["retention"]["current"]["histogram"]
    histogram = svg.bars("retention-histogram", "Retention now (memories per band)",
                         [f"{i / 10:.1f}" for i in range(10)], {"memories": hist},
                         y_label="memories", height=200)
    grid = r["attention"]["grid"]
    names = [f"#{row['cluster']} {row['label'] or row['scope']}" for row in grid["rows"]]
    heat = svg.heatmap("attention", "Attention heatmap: recall hits per cluster per day",
                       names, _short_days(grid["days"]), [row["counts"] for row in grid["rows"]])
    points = [{"x": p["x"], "y": p["y"], "r": p["r"], "heat": p["heat"],
               "label": f"#{p['id']} [{p['scope']}] {p['label']} — {p['size']} memories, "
                        f"{p['hits']} hits"} for p in r["clusters"]["points"]]
    cmap = svg.scatter("clusters", "Cluster map (PCA of centroids; size = members, "
                       "red = attention)", points)
    return {"growth": growth, "gate": gate, "latency": latency, "recalls": recalls,
            "across": across, "model": model, "histogram": histogram, "heat": heat,
            "cmap": cmap}


def render_html(r: dict[str, Any]) -> str:
    """Render a report built by :func:`tideline.report.build.build_report` as one HTML page."""
    c = _charts(r)
    t = r["totals"]
    rc, fb = r["recall"], r["feedback"]
    cards = [
        ("memories", t["memories"]), ("raw turns", t["turns"]),
        ("recalls", rc["count"]),
        ("abstained", f"{100 * rc['abstention_share']:.1f} %"),
        ("recall p50 / p95", f"{rc['p50_ms'] or 0:.1f} / {rc['p95_ms'] or 0:.1f} ms"),
        ("reflect / recall", "—" if fb["reflect_recall_ratio"] is None
         else f"{fb['reflect_recall_ratio']:.3f}"),
        ("dormant", r["fading"]["dormant"]), ("co_recall edges",
                                              r["associations"]["co_recall_edges"]),
        ("sleeps", r["sleeps"]["count"]), ("hook errors", r["hooks"]["errors"]),
        ("dream tokens", r["dream"]["tokens_in"] + r["dream"]["tokens_out"]),
    ]
    card_html = "".join(f'<div class="card"><div class="v">{escape(str(v))}</div>'
                        f'<div class="k">{escape(k)}</div></div>' for k, v in cards)
    warn = "".join(f'<li>{escape(w)}</li>' for w in r["warnings"])

    def mem_rows(items: list[dict[str, Any]]) -> list[list[Any]]:
        return [[f"#{m['id']}", m["scope"], m["kind"], m["status"], m["reinforcements"],
                 f"{m['retention']:.3f}", m["text"]] for m in items]

    head = ["id", "scope", "kind", "status", "reinf.", "retention", "text"]
    body = "".join([
        f'<header><h1>Tideline report</h1><p class="meta">{escape(r["store"])} · namespace '
        f'{escape(r["namespace"])} · {escape(r["embedder"])} · last {r["window"]["days"]} days '
        f'· generated {escape(r["generated_at"] or "")}</p></header>',
        f'<div class="cards">{card_html}</div>',
        f'<ul class="warnings">{warn}</ul>' if warn else "",
        _section("growth", "Growth", c["growth"], _table(
            ["by kind", "by scope", "by status"],
            [[", ".join(f"{k} {v}" for k, v in t["by_kind"].items()),
              ", ".join(f"{k} {v}" for k, v in t["by_scope"].items()),
              ", ".join(f"{k} {v}" for k, v in t["by_status"].items())]])),
        _section("gate", "Novelty gate", c["gate"],
                 "<h3>Corrections (a new memory updates an older one)</h3>",
                 _table(["new", "updates", "was", "now", "when"],
                        [[f"#{x['new']}", f"#{x['old']}", x["old_text"], x["new_text"],
                          x["at"] or ""]
                         for x in r["gate"].get("corrections", {}).get("latest", [])])),
        _section("recall", "Recall", c["recalls"], c["latency"]),
        _section("retention", "Retention and dynamics", c["across"], c["model"], c["histogram"],
                 "<h3>Reinforced in the window</h3>",
                 _table(head, mem_rows(r["reinforced"]["in_window"])),
                 f"<h3>Fading (retention under {r['fading'].get('below', 0.5):.2f}, "
                 "not dormant yet)</h3>",
                 _table(head, mem_rows(r["fading"]["lowest_retention"]))),
        _section("attention", "Attention", c["heat"], c["cmap"],
                 "<h3>Deserts (clusters no recall reached)</h3>",
                 _table(["cluster", "scope", "size", "label"],
                        [[f"#{d['id']}", d["scope"], d["size"], d["label"]]
                         for d in r["attention"]["deserts"]])),
        _section("associations", "Learned associations (co_recall)", _table(
            ["from", "to", "weight", "from text", "to text"],
            [[f"#{e['src']}", f"#{e['dst']}", f"{e['weight']:.3f}", e["src_text"], e["dst_text"]]
             for e in r["associations"]["strongest"]])),
        _section("topics", "Topics and entities", _table(
            ["topic", "scope", "memories"], [[x["label"], x["scope"], x["size"]]
                                             for x in r["topics"]]),
            _table(["entity", "mentions", "roles"],
                   [[n["entity"], n["mentions"], ", ".join(f"{k} ×{v}" for k, v in
                                                          n["roles"].items())]
                    for n in r["entities"]["nodes"]])),
        _section("sleeps", "Sleeps", _table(
            ["at", "ms", "only", "co_recall written", "dormant", "promoted", "errors"],
            [[s["at"], s["ms"], s["only"] or "all", s["co_recall_written"], s["dormant"],
              s["promoted"], "; ".join(f"{k}: {v}" for k, v in s["errors"].items())]
             for s in r["sleeps"]["recent"][:15]])),
        _section("hooks", "Hook errors and dream cost", _table(
            ["at", "detail"], [[e.get("at"), json.dumps(e, ensure_ascii=False)[:300]]
                               for e in r["hooks"]["recent"]]),
            _table(["dream calls", "tokens in", "tokens out"],
                   [[r["dream"]["calls"], r["dream"]["tokens_in"], r["dream"]["tokens_out"]]])),
    ])
    data = json.dumps(r, ensure_ascii=False, default=str).replace("<", "\\u003c")
    values = {"title": escape(f"Tideline report — {r['namespace']}"), "body": body,
              "data": data, "script": _asset("report.js")}
    # One pass over the template only: text inside the values is never re-scanned.
    page = re.sub(r"\{\{(title|body|data|script)\}\}", lambda m: values[m.group(1)],
                  _asset("template.html"))
    return "<!DOCTYPE html>\n" + page
