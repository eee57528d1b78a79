"""Small, dependency-free SVG charts for the HTML report and the docs.

Every chart is one ``<svg class="chart" data-chart="…">`` string with its own
axes, legend and ``<title>`` tooltips; all text is escaped. No JavaScript is
needed to see them (the report's script only adds interactivity).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "bars", "heatmap", "lines", "scatter"]

PALETTE = ("#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2", "#ca8a04",
           "#db2777", "#4b5563", "#65a30d")
_FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def _num(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:.3g}"


def _tick(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v / 1000:.3g}k"
    return f"{v:.3g}"


def _open(name: str, title: str, width: int, height: int) -> list[str]:
    return [f'<svg class="chart" data-chart="{escape(name)}" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
            f'aria-label="{escape(title)}" {_FONT}>',
            f'<rect class="bg" width="{width}" height="{height}" fill="#ffffff"/>',
            f'<text class="chart-title" x="8" y="16" font-size="13" font-weight="600">'
            f'{escape(title)}</text>']


def _axes(out: list[str], x0: int, y0: int, x1: int, y1: int, ymax: float,
          y_label: str) -> None:
    out.append(f'<line x1="{x0}" y1="{y1}" x2="{x1}" y2="{y1}" stroke="#9ca3af"/>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#9ca3af"/>')
    for i in range(5):
        v = ymax * i / 4
        y = y1 - (y1 - y0) * i / 4
        out.append(f'<line x1="{x0}" y1="{_num(y)}" x2="{x1}" y2="{_num(y)}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{x0 - 4}" y="{_num(y + 3)}" text-anchor="end" fill="#4b5563">'
                   f'{_tick(v)}</text>')
    if y_label:
        out.append(f'<text x="{x0}" y="{y0 - 6}" fill="#4b5563">{escape(y_label)}</text>')


def _legend_width(names: Iterable[str]) -> int:
    longest = max((len(n) for n in names), default=0)
    return int(min(340, 30 + 6.4 * longest))


def _legend(out: list[str], names: Sequence[str], x: int, y: int) -> None:
    for i, name in enumerate(names):
        cy = y + 14 * i
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<g class="legend-item" data-series="{escape(name)}">'
                   f'<rect x="{x}" y="{cy - 8}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{x + 14}" y="{cy + 1}">{escape(name)}</text></g>')


def lines(
    name: str, title: str, series: Mapping[str, Sequence[tuple[float, float]]], *,
    x_label: str = "", y_label: str = "", y_max: float | None = None,
    hline: tuple[float, str] | None = None, width: int = 640, height: int = 260,
    x_labels: Sequence[str] | None = None,
) -> str:
    """A line chart of named (x, y) series (``x_labels[i]`` names the tick at x = i)."""
    out = _open(name, title, width, height)
    x0, y0, x1, y1 = 48, 42, width - _legend_width(series) - 12, height - 30
    pts = [p for s in series.values() for p in s]
    if x_labels:  # a time axis spans its whole window, not only the days with data
        xmin, xmax = 0.0, float(max(1, len(x_labels) - 1))
    else:
        xmin = min((p[0] for p in pts), default=0.0)
        xmax = max((p[0] for p in pts), default=1.0)
    # Counted axes (days, "sleep #") tick at whole numbers only: no "sleep 0.25".
    counted = bool(x_labels) or all(float(p[0]).is_integer() for p in pts)
    if counted and xmax - xmin < 1:
        xmax = xmin + 1
    ymax = y_max if y_max is not None else max((p[1] for p in pts), default=1.0)
    ymax = ymax if ymax > 0 else 1.0
    xspan = (xmax - xmin) or 1.0
    _axes(out, x0, y0, x1, y1, ymax, y_label)

    def sx(v: float) -> float:
        return x0 + (x1 - x0) * (v - xmin) / xspan

    def sy(v: float) -> float:
        return y1 - (y1 - y0) * min(max(v, 0.0), ymax) / ymax

    ticks = [xmin + xspan * i / 4 for i in range(5)]
    if counted:
        ticks = sorted({float(round(v)) for v in ticks})
    if x_labels:
        ticks = [v for v in ticks if v < len(x_labels)]
    for v in ticks:
        label = x_labels[int(v)] if x_labels else _tick(v)
        out.append(f'<text x="{_num(sx(v))}" y="{y1 + 14}" text-anchor="middle" '
                   f'fill="#4b5563">{escape(label)}</text>')
    if x_label:
        out.append(f'<text x="{x1}" y="{y1 + 26}" text-anchor="end" fill="#4b5563">'
                   f'{escape(x_label)}</text>')
    if hline is not None:
        hy = sy(hline[0])
        out.append(f'<line class="hline" x1="{x0}" y1="{_num(hy)}" x2="{x1}" y2="{_num(hy)}" '
                   f'stroke="#6b7280" stroke-dasharray="4 3"/>'
                   f'<text x="{x1 - 2}" y="{_num(hy - 3)}" text-anchor="end" fill="#6b7280">'
                   f'{escape(hline[1])}</text>')
    for i, (label, s) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        if not s:
            continue
        path = " ".join(f"{_num(sx(x))},{_num(sy(y))}" for x, y in s)
        out.append(f'<polyline class="series" data-series="{escape(label)}" fill="none" '
                   f'stroke="{color}" stroke-width="2" points="{path}"><title>{escape(label)}'
                   f'</title></polyline>')
        if len(s) <= 60:
            for x, y in s:
                out.append(f'<circle class="point" cx="{_num(sx(x))}" cy="{_num(sy(y))}" r="2.5" '
                           f'fill="{color}"><title>{escape(label)}: {_tick(x)} → '
                           f'{y:.3g}</title></circle>')
    _legend(out, list(series), x1 + 16, y0 + 6)
    out.append("</svg>")
    return "".join(out)


def bars(
    name: str, title: str, labels: Sequence[str], series: Mapping[str, Sequence[float]], *,
    y_label: str = "", width: int = 640, height: int = 240,
) -> str:
    """Stacked bars: one bar per label, one colour per series."""
    out = _open(name, title, width, height)
    x0, y0, x1, y1 = 48, 42, width - _legend_width(series) - 12, height - 36
    totals = [sum(s[i] for s in series.values()) for i in range(len(labels))]
    ymax = max(totals, default=0.0) or 1.0
    _axes(out, x0, y0, x1, y1, ymax, y_label)
    n = max(1, len(labels))
    step = (x1 - x0) / n
    bw = max(1.0, step * 0.8)
    for i, lab in enumerate(labels):
        base = 0.0
        x = x0 + step * i + (step - bw) / 2
        for j, (sname, s) in enumerate(series.items()):
            v = s[i]
            if v <= 0:
                continue
            h = (y1 - y0) * v / ymax
            y = y1 - (y1 - y0) * (base + v) / ymax
            out.append(f'<rect class="bar" x="{_num(x)}" y="{_num(y)}" width="{_num(bw)}" '
                       f'height="{_num(h)}" fill="{PALETTE[j % len(PALETTE)]}">'
                       f'<title>{escape(lab)} · {escape(sname)}: {_num(v)}</title></rect>')
            base += v
        if n <= 16 or i % max(1, n // 8) == 0:
            out.append(f'<text x="{_num(x + bw / 2)}" y="{y1 + 14}" text-anchor="middle" '
                       f'fill="#4b5563">{escape(lab)}</text>')
    _legend(out, list(series), x1 + 16, y0 + 6)
    out.append("</svg>")
    return "".join(out)


def heatmap(
    name: str, title: str, rows: Sequence[str], cols: Sequence[str],
    values: Sequence[Sequence[float]], *, width: int = 900, cell: int = 16,
) -> str:
    """A grid of cells shaded by value (rows × columns)."""
    left, top = 220, 34
    cw = max(4.0, min(cell, (width - left - 10) / max(1, len(cols))))
    height = top + cell * max(1, len(rows)) + 40
    out = _open(name, title, width, int(height))
    peak = max((v for r in values for v in r), default=0.0) or 1.0
    for i, label in enumerate(rows):
        y = top + cell * i
        short = label if len(label) <= 34 else label[:33] + "…"
        out.append(f'<text x="{left - 6}" y="{y + cell - 4}" text-anchor="end">'
                   f'{escape(short)}</text>')
        for j, col in enumerate(cols):
            v = values[i][j]
            alpha = 0.06 + 0.94 * math.sqrt(v / peak) if v > 0 else 0.0
            fill = f"rgba(220,38,38,{alpha:.3f})" if v > 0 else "#f3f4f6"
            out.append(f'<rect class="cell" x="{_num(left + cw * j)}" y="{y}" '
                       f'width="{_num(cw - 1)}" height="{cell - 1}" fill="{fill}">'
                       f'<title>{escape(label)} · {escape(col)}: {_num(v)} hits</title></rect>')
    if cols:
        for j in (0, len(cols) // 2, len(cols) - 1):
            out.append(f'<text x="{_num(left + cw * j)}" y="{top + cell * len(rows) + 14}" '
                       f'fill="#4b5563">{escape(cols[j])}</text>')
    if not rows:
        out.append(f'<text x="{left}" y="{top + 12}" fill="#6b7280">no recall hits in the '
                   f'window yet</text>')
    out.append("</svg>")
    return "".join(out)


def scatter(
    name: str, title: str, points: Sequence[dict[str, float | str]], *,
    width: int = 640, height: int = 360,
) -> str:
    """Bubbles at (x, y) with radius ``r`` (0–1) and heat ``heat`` (0–1) as colour."""
    out = _open(name, title, width, height)
    x0, y0, x1, y1 = 20, 30, width - 20, height - 20
    xs = [float(p["x"]) for p in points]
    ys = [float(p["y"]) for p in points]
    xmin, xmax = (min(xs), max(xs)) if xs else (0.0, 1.0)
    ymin, ymax = (min(ys), max(ys)) if ys else (0.0, 1.0)
    xspan = (xmax - xmin) or 1.0
    yspan = (ymax - ymin) or 1.0
    out.append(f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="#f9fafb" '
               f'stroke="#e5e7eb"/>')
    for p in sorted(points, key=lambda q: -float(q["r"])):
        cx = x0 + 20 + (x1 - x0 - 40) * (float(p["x"]) - xmin) / xspan
        cy = y1 - 20 - (y1 - y0 - 40) * (float(p["y"]) - ymin) / yspan
        r = 4 + 22 * math.sqrt(max(0.0, float(p["r"])))
        heat = max(0.0, min(1.0, float(p["heat"])))
        fill = f"rgba({int(37 + 183 * heat)},{int(99 - 61 * heat)},{int(235 - 197 * heat)},0.55)"
        out.append(f'<circle class="bubble" cx="{_num(cx)}" cy="{_num(cy)}" r="{_num(r)}" '
                   f'fill="{fill}" stroke="#374151" stroke-width="0.5"><title>'
                   f'{escape(str(p["label"]))}</title></circle>')
    if not points:
        out.append(f'<text x="{x0 + 10}" y="{y0 + 20}" fill="#6b7280">no clusters yet — run '
                   f'`tideline sleep`</text>')
    out.append("</svg>")
    return "".join(out)
