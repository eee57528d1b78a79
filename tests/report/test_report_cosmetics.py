"""Issue 28 §2.11, the report's cosmetics: what a young store's report must not say.

On ``ed15f9c`` a store a few minutes old listed every memory as "fading", the
"retention across sleeps" chart ticked at sleep 0.25, 0.5 and 0.75, and a time series
with data on one day drew an axis that was that one day five times over.
"""

from __future__ import annotations

import re

from tideline import Memory
from tideline.report.html import render_html
from tideline.report.text import render_text

_X_TICK = re.compile(r'<text x="[\d.]+" y="\d+" text-anchor="middle" fill="#4b5563">'
                     r'([^<]*)</text>')


def _chart(html: str, name: str) -> str:
    start = html.index(f'data-chart="{name}"')
    return html[start:html.index("</svg>", start)]


def test_a_young_stores_report_lists_nothing_as_fading_and_ticks_whole(mem: Memory) -> None:
    for text in ("atlas runs PostgreSQL 16", "the loader reads a nightly CSV extract",
                 "Mira prefers concise answers", "deploys never happen on Fridays"):
        mem.write(text, scope="atlas")
    mem.recall("which database does atlas use", scope="atlas")
    mem.sleep()
    mem.write("the cache TTL is five minutes", scope="atlas")
    mem.sleep()
    report = mem.report(days=14)
    assert report["fading"]["lowest_retention"] == []
    assert "— none yet" in render_text(report)
    html = render_html(report)
    sleeps = _X_TICK.findall(_chart(html, "retention-sleeps"))
    assert sleeps and all(t.isdigit() for t in sleeps), sleeps
    assert len(set(sleeps)) == len(sleeps)
    for name in ("latency", "growth"):  # recalls and writes on one day only
        days = _X_TICK.findall(_chart(html, name))
        assert len(days) >= 2 and len(set(days)) == len(days), (name, days)
