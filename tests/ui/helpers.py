"""Helpers for the UI tests: a seeded store, a client that speaks like this app's own page."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from starlette.testclient import TestClient

from tideline import Memory
from tideline.ui.app import build_app

HOST, PORT = "127.0.0.1", 8766
ORIGIN = f"http://{HOST}:{PORT}"
#: Mid-2024 (a fixed day the conversation pages are asked for).
DAY_TS = 1_718_000_000.0
DAY = time.strftime("%Y-%m-%d", time.gmtime(DAY_TS))


@dataclass
class Seeded:
    """Ids of what :func:`seed` wrote."""

    lisbon: int
    porto: int
    beta: int
    turns: tuple[int, ...]


def seed(mem: Memory) -> Seeded:
    """Two sessions in project ``alpha``, memories linked to their turns, one in ``beta``."""
    turns = mem.add_turns([
        {"speaker": "user", "text": "I moved to Lisbon last spring, near the river.",
         "session": "s-lisbon", "timestamp": DAY_TS},
        {"speaker": "assistant", "text": "Lisbon by the Tagus, noted.",
         "session": "s-lisbon", "timestamp": DAY_TS + 60},
        {"speaker": "user", "text": "My sister lives in Porto and visits monthly.",
         "session": "s-lisbon", "timestamp": DAY_TS + 120},
    ], scope="alpha")
    ids = turns.turn_ids
    lisbon = mem.remember("The user lives in Lisbon near the river Tagus.", scope="alpha",
                          source_links=[ids[0]], tags=["home"]).id
    porto = mem.remember("The user's sister lives in Porto and visits every month.",
                         scope="alpha", source_links=[ids[2]], kind="fact").id
    beta = mem.remember("Project beta deploys with a blue-green switch on Fridays.",
                        scope="beta").id
    return Seeded(lisbon, porto, beta, ids)


class Page:
    """A client that sends what a browser on this app's own page sends."""

    def __init__(self, mem: Memory, **kw: Any) -> None:
        self.app = build_app(mem, host=HOST, port=PORT, **kw)
        self.client = TestClient(self.app, base_url=ORIGIN)

    def get(self, url: str, **kw: Any) -> Any:
        return self.client.get(url, **kw)

    def csrf(self) -> str:
        found = re.search(r'<meta name="csrf" content="([^"]+)"', self.get("/journal").text)
        assert found, "no CSRF token on the page"
        return found.group(1)

    def post(self, url: str, data: dict[str, Any], *, origin: str | None = ORIGIN,
             csrf: bool = True, **kw: Any) -> Any:
        headers = dict(kw.pop("headers", {}))
        if origin is not None:
            headers["Origin"] = origin
        body = dict(data)
        if csrf:
            body.setdefault("csrf", self.csrf())
        return self.client.post(url, data=body, headers=headers, follow_redirects=False, **kw)
