"""The XSS corpus: a memory and a conversation whose every field holds markup, script,
``javascript:`` links, bidi overrides, a template expression and (written past the caps,
as an old import might have) one megabyte of text."""

from __future__ import annotations

import dataclasses

from tideline import Memory

SCRIPT = '<script>window.__xss = 1; alert("xss-script")</script>'
IMG = '<img src=x onerror="window.__xss = 2; alert(\'xss-img\')">'
LINK = '<a href="javascript:window.__xss=3;alert(\'xss-link\')">click me</a>'
SVG = '"><svg onload="window.__xss=4;alert(1)">'
RTL = "invoice\u202egpj.exe"
TEMPLATE = "{{ 7*7 }} {% raw %}"
HOSTILE = " ".join([SCRIPT, IMG, LINK, SVG, RTL, TEMPLATE, "javascript:alert(5)"])
MEGABYTE = 1_000_000

#: What must never reach a page unescaped.
RAW = ["<script>window", "<img src=x", 'href="javascript:', "<svg onload", "\u202e",
       '<a href="javascript']


def plant(mem: Memory, scope: str = "alpha") -> dict[str, int]:
    """Write the corpus; returns the ids of the hostile memory, the megabyte one and a turn."""
    turns = mem.add_turns([
        {"speaker": f"user {SCRIPT}", "text": f"Before the xss turn {HOSTILE}",
         "session": f"xss-session {IMG}", "timestamp": 1_718_100_000},
        {"speaker": "assistant", "text": f"xss reply {LINK} {RTL}",
         "session": f"xss-session {IMG}", "timestamp": 1_718_100_060},
    ], scope=scope)
    mid = mem.write(f"xss gesture {HOSTILE}", context=f"ctx {HOSTILE}",
                    cognition_direction=f"dir {HOSTILE}", scope=scope,
                    tags=[SCRIPT[:60], "javascript:alert(6)", RTL],
                    entities_role=f"role {HOSTILE}", related_entities=[IMG[:60], LINK[:60]],
                    source_links=list(turns.turn_ids)).id
    big = mem.remember("xss megabyte placeholder", scope=scope).id
    rec = mem.store.get_memory(big)
    huge = ("xss megabyte " + HOSTILE + " ") * (MEGABYTE // (len(HOSTILE) + 14) + 1)
    with mem.store.transaction() as c:  # past the write caps, as an old import might be
        mem.store.update_memory(c, dataclasses.replace(rec, gesture=huge[:MEGABYTE]))
    return {"hostile": mid, "big": big, "turn": turns.turn_ids[0]}
