"""A correction the gate kept is visible: in ``show``, in the report (JSON, text, HTML).

(The DREAM comb layer's view is in tests/dream/test_comb_corrections.py.)
"""

from __future__ import annotations

import pytest

from tideline import Memory
from tideline.report.html import render_html
from tideline.report.text import render_text

pytestmark = pytest.mark.backends


def _corrected(mem: Memory) -> tuple[int, int]:
    old = mem.remember("The atlas cache TTL is five minutes")
    new = mem.remember("The atlas cache TTL is ten minutes")
    assert (old.decision, new.decision) == ("new", "correct")
    return old.id, new.id


def test_show_lists_the_updates_edge(mem: Memory) -> None:
    old, new = _corrected(mem)
    shown = mem.show(new)
    assert {"src": new, "dst": old, "type": "updates"}.items() <= shown["edges"][0].items()
    assert (shown["updates"], shown["updated_by"]) == ([old], [])
    before = mem.show(old)
    assert (before["updates"], before["updated_by"]) == ([], [new])


def test_report_lists_corrections(mem: Memory) -> None:
    old, new = _corrected(mem)
    r = mem.report(days=7)
    assert r["gate"]["totals"]["correct"] == 1 and r["gate"]["totals"]["new"] == 1
    fixes = r["gate"]["corrections"]
    assert fixes["count"] == 1
    assert (fixes["latest"][0]["new"], fixes["latest"][0]["old"]) == (new, old)
    assert fixes["latest"][0]["old_text"] == "The atlas cache TTL is five minutes"
    assert r["totals"]["edges"].get("updates") == 1
    text = render_text(r)
    assert f"#{new} updates #{old}" in text and "corrections kept (updates edges): 1" in text
    html = render_html(r)
    assert "Corrections (a new memory updates an older one)" in html
    assert "The atlas cache TTL is ten minutes" in html
