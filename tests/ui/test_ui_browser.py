"""`tideline ui` in a real browser: Playwright driving the Debian Chromium against the app
served by uvicorn on loopback (one server and one browser for the module).

The screenshots of docs/ui.md are taken here, from the pages the tests just checked. They
land in docs/ui/ only when `TIDELINE_UI_SHOTS` names a directory
(`TIDELINE_UI_SHOTS=docs/ui make test`); otherwise in pytest's temporary directory, so a
plain test run still takes them (a page that cannot render still fails) without dirtying
the git tree.
"""

from __future__ import annotations

import html
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import hashing
from tests.dream.helpers import LLMServer, answer, serve
from tests.dream.helpers import settings as dream_settings
from tests.ui.helpers import Seeded, seed
from tests.ui.xss import plant

from tideline import Memory
from tideline.errors import NotFound
from tideline.ui.app import build_app

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def chromium() -> None:
    """The browser these tests drive: `make test` installs Debian's (via `make e2e-tools`),
    so its absence is a failure, never a silent skip."""
    assert CHROMIUM.exists(), "no /usr/bin/chromium: run `make e2e-tools` (Debian's chromium)"


@dataclass
class Served:
    """The app on loopback over a seeded store."""

    url: str
    mem: Memory
    seeded: Seeded
    xss: dict[str, int]
    llm: LLMServer
    conflict: tuple[int, int]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    import uvicorn

    mp = pytest.MonkeyPatch()
    mp.delenv("TIDELINE_DATABASE_URL", raising=False)
    mem = Memory.open(tmp_path_factory.mktemp("ui"), embedder=hashing(), project="alpha")
    llm_gen = serve("openai")
    llm = next(llm_gen)
    try:
        s = seed(mem)
        xss = plant(mem)
        a = mem.remember("The team standup is at 9:30 every weekday.", scope="alpha").id
        b = mem.remember("The team standup moved to 10:00 on weekdays.", scope="alpha").id
        with mem.store.transaction() as c:
            mem.store.add_edge(c, b, a, "contradicts", 1.0, time.time())
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        port = sock.getsockname()[1]
        app = build_app(mem, host="127.0.0.1", port=port, dream_settings=dream_settings(
            provider="openai", url=llm.url, model="test-model", api_key="sk-test",
            backoff=0.0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        for _ in range(200):
            if server.started:
                break
            time.sleep(0.05)
        yield Served(f"http://127.0.0.1:{port}", mem, s, xss, llm, (b, a))
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
    finally:
        mem.close()
        llm_gen.close()
        mp.undo()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        try:
            yield chromium
        finally:
            chromium.close()


def shots_dir(tmp: Path) -> Path:
    """Where screenshots go: `TIDELINE_UI_SHOTS` (relative to the repository root) when set,
    else `tmp`."""
    named = os.environ.get("TIDELINE_UI_SHOTS", "").strip()
    if not named:
        return tmp
    path = Path(named)
    return path if path.is_absolute() else ROOT / path


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shots_dir(tmp_path_factory.mktemp("shots"))


@pytest.fixture
def page(browser: Any, shots: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    tab.shots = shots
    dialogs: list[str] = []
    tab.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.dialogs = dialogs
    try:
        yield tab
    finally:
        context.close()


def shot(page: Any, name: str) -> Path:
    page.shots.mkdir(parents=True, exist_ok=True)
    path: Path = page.shots / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 0
    return path


def test_screenshots_stay_out_of_the_tree_unless_asked(
        served: Served, page: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in (ROOT / "docs" / "ui").glob("*.png")}
    page.goto(f"{served.url}/journal")
    path = shot(page, "journal")
    assert path.stat().st_size > 0
    if not os.environ.get("TIDELINE_UI_SHOTS", "").strip():
        assert ROOT not in path.parents, path
        after = {p.name: p.stat().st_mtime_ns for p in (ROOT / "docs" / "ui").glob("*.png")}
        assert after == before
    monkeypatch.delenv("TIDELINE_UI_SHOTS", raising=False)
    assert shots_dir(tmp_path) == tmp_path
    monkeypatch.setenv("TIDELINE_UI_SHOTS", "docs/ui")
    assert shots_dir(tmp_path) == ROOT / "docs" / "ui"
    monkeypatch.setenv("TIDELINE_UI_SHOTS", str(tmp_path / "x"))
    assert shots_dir(tmp_path) == tmp_path / "x"


def test_search_open_a_memory_and_follow_its_source_into_the_conversation(
        served: Served, page: Any) -> None:
    page.goto(f"{served.url}/?scope=alpha")
    page.fill("#q", "where does the user live Lisbon")
    page.press("#q", "Enter")
    page.wait_for_selector("ol.results li")
    assert "found by" in page.inner_text("ol.results")
    shot(page, "search")
    page.click(f'ol.results a[href^="/memory/{served.seeded.lisbon}?"]')
    page.wait_for_url(re.compile(rf"/memory/{served.seeded.lisbon}\?"))
    assert "Lisbon near the river Tagus" in page.inner_text("#gesture")
    assert "showing alpha (with global)" in page.inner_text("#where")
    shot(page, "memory")
    page.click("a.source-link")
    page.wait_for_url(re.compile(r"/session\?"))
    linked = page.locator(f"#turn-{served.seeded.turns[0]}")
    assert "I moved to Lisbon" in linked.inner_text()
    assert "linked" in (linked.get_attribute("class") or "")
    assert page.evaluate("document.activeElement.id") == f"turn-{served.seeded.turns[0]}"
    shot(page, "conversation")


def test_keyboard_only_search(served: Served, page: Any) -> None:
    page.goto(f"{served.url}/?scope=alpha")
    page.wait_for_selector("body[data-ready='1']")
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("sister Porto visits")
    page.keyboard.press("Enter")
    page.wait_for_selector("ol.results li")
    target = f"/memory/{served.seeded.porto}?"
    for _ in range(40):
        page.keyboard.press("Tab")
        href = page.evaluate("document.activeElement.getAttribute('href') || ''")
        if href.startswith(target):
            break
    else:
        pytest.fail("no result link reachable with Tab")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"/memory/{served.seeded.porto}\?"))
    assert page.dialogs == []


def test_revise_then_forget_with_confirmation(served: Served, page: Any) -> None:
    mem, mid = served.mem, served.seeded.porto
    page.goto(f"{served.url}/memory/{mid}?scope=alpha")
    page.click("#revise-box summary")
    page.fill("#revise-gesture", "The user's sister lives in Braga now and visits weekly.")
    page.click("#revise-submit")
    page.wait_for_selector(".notice")
    assert "revised" in page.inner_text(".notice")
    new = int(re.search(r"/memory/(\d+)", page.url).group(1))  # type: ignore[union-attr]
    assert mem.get(new, scope="alpha").gesture.startswith("The user's sister lives in Braga")
    assert mem.get(mid, scope="alpha").status == "superseded"
    page.click("#forget")
    page.wait_for_selector("#forget-confirm")
    assert mem.get(new, scope="alpha").id == new  # asking deleted nothing
    assert page.evaluate("document.activeElement.id") == "forget-confirm"
    shot(page, "forget")
    page.click("#forget-confirm")
    page.wait_for_selector(".notice")
    assert "forgot" in page.inner_text(".notice")
    with pytest.raises(NotFound):
        mem.get(new, scope="alpha")


def test_reflect_buttons_reward_the_memory(served: Served, page: Any) -> None:
    mid = served.seeded.lisbon
    before = served.mem.get(mid, scope="alpha").reinforcements
    page.goto(f"{served.url}/memory/{mid}?scope=alpha")
    page.click("#reflect-up")
    page.wait_for_selector(".notice")
    assert served.mem.get(mid, scope="alpha").reinforcements == before + 1


def test_approve_and_apply_a_dream_plan(served: Served, page: Any) -> None:
    mem, s = served.mem, served.seeded
    served.llm.replies.append(answer({
        "weights": [{"memory_id": s.lisbon, "importance": 5, "reason": "where the user lives"}],
        "conflicts": [{"memory_id": served.conflict[0], "other_id": s.lisbon,
                       "relation": "contradicts", "reason": "not really"}],
        "profiles": [], "self_concept": [], "threads": []}))
    page.goto(f"{served.url}/dream?scope=alpha")
    page.select_option("#layer", "comb")
    page.click("#ask")
    page.wait_for_selector("#diff")
    assert f"#{s.lisbon} importance" in page.inner_text("#diff")
    assert mem.get(s.lisbon, scope="alpha").importance == 3  # planned only
    page.uncheck('input[value="conflicts:0"]')
    shot(page, "dream-plan")
    page.click("#apply")
    page.wait_for_selector("#result")
    assert mem.get(s.lisbon, scope="alpha").importance == 5
    assert not [e for e in mem.store.edges_of([s.lisbon])
                if e.type == "contradicts" and served.conflict[0] in (e.src, e.dst)]


def test_conflicts_side_by_side_and_the_map(served: Served, page: Any) -> None:
    b, a = served.conflict
    page.goto(f"{served.url}/conflicts?scope=alpha")
    assert "standup moved to 10:00" in page.inner_text(f"#pair-{b}-{a}")
    shot(page, "conflicts")
    page.goto(f"{served.url}/map?scope=alpha")
    page.wait_for_selector("svg.chart")
    page.goto(f"{served.url}/journal?scope=alpha")
    shot(page, "journal")


def test_xss_corpus_opens_no_dialog_and_runs_no_script(served: Served, page: Any) -> None:
    urls = [f"/memory/{served.xss['hostile']}?scope=alpha",
            f"/memory/{served.xss['big']}?scope=alpha",
            "/?scope=alpha&q=xss+gesture+script+alert", "/?scope=alpha&q=xss+reply",
            "/conversations?scope=alpha&day=2024-06-11", "/journal?scope=alpha"]
    for url in urls:
        page.goto(served.url + url)
        page.wait_for_selector("body[data-ready='1']")  # our own script did run
        assert page.evaluate("typeof window.__xss") == "undefined", url
    page.goto(served.url + urls[0])
    text = page.inner_text("#gesture")
    assert '<script>window.__xss = 1; alert("xss-script")</script>' in text
    assert "invoice⟨U+202E⟩gpj.exe" in text
    assert page.locator('a[href^="javascript:"]').count() == 0
    assert page.locator("main img, main script, main svg").count() == 0
    session = page.goto(served.url + "/conversations?scope=alpha&day=2024-06-11")
    assert session is not None
    page.click("table.sessions a")
    page.wait_for_selector("body[data-ready='1']")
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.dialogs == []


def test_a_cross_origin_post_is_refused(served: Served, page: Any) -> None:
    mid = served.seeded.lisbon
    before = served.mem.get(mid, scope="alpha").reinforcements
    token = re.search(r'name="csrf" content="([^"]+)"',
                      _get(served.url + "/journal")).group(1)  # type: ignore[union-attr]
    # Even holding the right CSRF token, a page of another origin cannot act.
    form = (f'<form id="f" method="post" action="{served.url}/memory/{mid}/reflect?scope=alpha">'
            f'<input name="csrf" value="{html.escape(token)}"><input name="reward" value="up">'
            '</form><script>document.getElementById("f").submit()</script>')
    evil = _evil_site(form)
    try:
        page.goto(evil)
        page.wait_for_url(re.compile(re.escape(served.url)))
        assert "cross-origin request refused" in page.inner_text("body")
    finally:
        evil_server = _EVIL.pop()
        evil_server.shutdown()
        evil_server.server_close()
    assert served.mem.get(mid, scope="alpha").reinforcements == before


_EVIL: list[ThreadingHTTPServer] = []


def _get(url: str) -> str:
    import httpx

    return httpx.get(url, timeout=30).text


def _evil_site(body: str) -> str:
    """Another origin (a second loopback port) serving ``body``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            data = f"<!doctype html><html><body>{body}</body></html>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _EVIL.append(server)
    return f"http://127.0.0.1:{server.server_address[1]}/"
