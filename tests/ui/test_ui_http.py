"""`tideline ui` over HTTP (Starlette's TestClient), on SQLite and PostgreSQL: every page
renders real data through the facade, names its project, keeps other projects and
namespaces out, and every action is a journaled POST."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.backend import Backend, rows
from tests.conftest import hashing
from tests.ui.helpers import DAY, DAY_TS, ORIGIN, Page, seed

from tideline import Memory

pytestmark = pytest.mark.backends


def test_every_page_renders_and_names_namespace_and_project(mem: Memory) -> None:
    s = seed(mem)
    page = Page(mem)
    for url in ["/?scope=alpha", "/?scope=alpha&q=Lisbon", f"/memory/{s.lisbon}?scope=alpha",
                f"/conversations?scope=alpha&day={DAY}", "/session?scope=alpha&id=s-lisbon",
                "/journal?scope=alpha", "/conflicts?scope=alpha", "/dream?scope=alpha",
                "/map?scope=alpha"]:
        res = page.get(url)
        assert res.status_code == 200, (url, res.text[:500])
        assert 'data-namespace="default"' in res.text, url
        assert "showing <b>alpha (with global)</b>" in res.text, url
    every = page.get("/journal?scope=*").text
    assert "showing <b>all projects</b>" in every


def test_search_uses_recall_says_why_and_abstains_plainly(mem: Memory) -> None:
    s = seed(mem)
    page = Page(mem)
    html = page.get("/?scope=alpha&q=where+does+the+user+live+Lisbon").text
    assert f'href="/memory/{s.lisbon}?scope=alpha"' in html
    assert "found by" in html and "confidence" in html
    assert "Project beta deploys" not in html  # another project
    # The test's facade is in project global; the page acted in alpha: the operator's view.
    recalls = [e for e in mem.events(kinds=["recall"], all_scopes=True)
               if e["data"].get("tier") == "ui"]
    assert recalls, "the search went through the journaled recall path"
    nothing = page.get("/?scope=alpha&q=zzqx+vvbnm+qwpl").text
    assert "Tideline abstains" in nothing
    kinds = page.get("/?scope=alpha&q=Lisbon&kind=preference").text
    assert f'href="/memory/{s.lisbon}' not in kinds  # the kind filter reached recall


def test_memory_page_shows_fields_history_edges_and_source_conversation(mem: Memory) -> None:
    s = seed(mem)
    new = mem.revise(s.lisbon, "The user lives in Lisbon, in Alfama, near the Tagus.",
                     scope="alpha").id
    page = Page(mem)
    html = page.get(f"/memory/{new}?scope=alpha").text
    for label in ("cognition direction", "entities and roles", "importance", "retention",
                  "stability", "event time", "recorded"):
        assert label in html
    assert f'href="/memory/{s.lisbon}?scope=alpha">#{s.lisbon}</a> v' in html  # history
    assert re.search(rf'supersedes</span> → <a href="/memory/{s.lisbon}\?scope=alpha"', html)
    # The source turn opened as the raw conversation around it, with a link into it.
    assert "I moved to Lisbon last spring" in html and "Lisbon by the Tagus, noted." in html
    assert f"turn={s.turns[0]}" in html and f"#turn-{s.turns[0]}" in html


def test_conversations_by_day_turns_and_linking_memories(mem: Memory) -> None:
    s = seed(mem)
    page = Page(mem)
    days = page.get(f"/conversations?scope=alpha&day={DAY}").text
    assert "s-lisbon" in days and "<td>3</td>" in days
    latest = page.get("/conversations?scope=alpha").text  # defaults to the newest day
    assert f"Conversations on {DAY}" in latest
    session = page.get("/session?scope=alpha&id=s-lisbon").text
    assert session.index("I moved to Lisbon") < session.index("My sister lives in Porto")
    assert f'memories from this turn: <a href="/memory/{s.porto}?scope=alpha"' in session
    assert page.get("/conversations?scope=beta&day=" + DAY).text.count("s-lisbon") == 0
    assert "s-lisbon" in page.get("/conversations?scope=*").text  # every project, newest day


def test_actions_go_through_the_facade_and_are_journaled(mem: Memory) -> None:
    s = seed(mem)
    page = Page(mem)
    res = page.post(f"/memory/{s.porto}/reflect?scope=alpha", {"reward": "up"})
    assert res.status_code == 303 and "reflected" in res.headers["location"]
    assert mem.get(s.porto, scope="alpha").reinforcements == 1
    res = page.post(f"/memory/{s.lisbon}/revise?scope=alpha",
                    {"gesture": "The user lives in Porto now.", "tags": "home, moved"})
    new = int(re.search(r"/memory/(\d+)", res.headers["location"]).group(1))  # type: ignore[union-attr]
    assert mem.get(new, scope="alpha").gesture == "The user lives in Porto now."
    assert mem.get(new, scope="alpha").tags == ("home", "moved")
    assert mem.get(s.lisbon, scope="alpha").status == "superseded"
    # Forget asks first: the first POST deletes nothing.
    first = page.post(f"/memory/{s.porto}/forget?scope=alpha", {})
    assert "confirm=forget" in first.headers["location"]
    assert mem.get(s.porto, scope="alpha").id == s.porto
    confirm = page.get(first.headers["location"]).text
    assert f"Forget #{s.porto} for real?" in confirm
    page.post(f"/memory/{s.porto}/forget?scope=alpha", {"confirm": "yes"})
    assert page.get(f"/memory/{s.porto}?scope=alpha").status_code == 404
    kinds = [e["kind"] for e in mem.events(kinds=["reflect", "revise", "forget"],
                                          all_scopes=True)]
    assert sorted(kinds) == ["forget", "reflect", "revise"]
    journal = page.get("/journal?scope=alpha&group=writes").text
    assert 'class="ev-forget"' in journal and 'class="ev-revise"' in journal
    assert 'class="ev-recall"' not in journal


def test_other_projects_and_namespaces_never_appear(mem: Memory, store_dir: Path,
                                                    backend: Backend) -> None:
    s = seed(mem)
    page = Page(mem)
    assert page.get(f"/memory/{s.beta}?scope=alpha").status_code == 404
    assert page.get(f"/memory/{s.beta}?scope=beta").status_code == 200
    assert page.get(f"/memory/{s.beta}?scope=*").status_code == 200  # explicit choice
    everything = page.get("/?scope=*&q=deploys+blue-green+Fridays").text
    assert f"/memory/{s.beta}" in everything
    other = backend.open(store_dir, embedder=hashing(), namespace="other", project="alpha")
    try:
        secret = other.remember("Other namespace: the vault code is 4711.", scope="alpha").id
    finally:
        other.close()
    for scope in ("alpha", "*"):
        assert "the vault code is" not in page.get(f"/?scope={scope}&q=vault+code+4711").text
        assert "the vault code is" not in page.get(f"/journal?scope={scope}").text
        if secret not in (s.lisbon, s.porto, s.beta):
            assert page.get(f"/memory/{secret}?scope={scope}").status_code == 404


def test_new_items_show_without_a_restart(mem: Memory, store_dir: Path,
                                          backend: Backend) -> None:
    seed(mem)
    page = Page(mem)
    assert "Kyoto" not in page.get("/journal?scope=*").text
    writer = backend.open(store_dir, embedder=hashing(), project="alpha")  # another writer
    try:
        mid = writer.remember("The user plans a trip to Kyoto in April.", scope="alpha").id
    finally:
        writer.close()
    assert page.get(f"/memory/{mid}?scope=alpha").status_code == 200
    assert f'/memory/{mid}?scope=alpha' in page.get("/?scope=alpha&q=trip+Kyoto+April").text


ROOT = Path(__file__).resolve().parents[2]

#: Another process (what a hook or the MCP server is): opens the same store through the
#: facade, stores a turn of a new session and a memory linked to it, prints their ids.
WRITER = textwrap.dedent("""
    import json, sys
    sys.path[:0] = [sys.argv[1] + "/src", sys.argv[1]]
    from tests.backend import open_memory
    from tests.conftest import hashing
    url = sys.argv[3] or None
    mem = open_memory(sys.argv[2], url, embedder=hashing(), project="alpha")
    try:
        turn = mem.add_turns([{"speaker": "user", "session": "s-kyoto",
                               "timestamp": float(sys.argv[4]),
                               "text": "We fly to Kyoto in April for the cherry blossoms."}],
                             scope="alpha").turn_ids[0]
        mid = mem.remember("The user plans a trip to Kyoto in April.", scope="alpha",
                           source_links=[turn]).id
    finally:
        mem.close()
    print(json.dumps({"turn": turn, "memory": mid}))
""")


def test_a_write_by_another_process_shows_on_the_next_page_load(
        mem: Memory, store_dir: Path, backend: Backend) -> None:
    seed(mem)
    page = Page(mem)  # the same app object serves before and after
    before = {url: page.get(url).text for url in (
        "/?scope=alpha&q=trip+Kyoto+April", "/journal?scope=alpha",
        f"/conversations?scope=alpha&day={DAY}")}
    assert not any("trip to Kyoto" in t or "s-kyoto" in t for t in before.values())
    proc = subprocess.run(
        [sys.executable, "-c", WRITER, str(ROOT), str(store_dir), backend.url or "",
         str(DAY_TS + 600)],
        capture_output=True, text=True, timeout=300, check=False, env=backend.env(),
        cwd=store_dir.parent)
    assert proc.returncode == 0, proc.stderr
    wrote = json.loads(proc.stdout.strip().splitlines()[-1])
    mid = wrote["memory"]
    memory = page.get(f"/memory/{mid}?scope=alpha")
    assert memory.status_code == 200
    assert "The user plans a trip to Kyoto in April." in memory.text
    assert "We fly to Kyoto in April" in memory.text  # its source turn, as the conversation
    assert f"/memory/{mid}?scope=alpha" in page.get("/?scope=alpha&q=trip+Kyoto+April").text
    assert f"/memory/{mid}?scope=alpha" in page.get("/journal?scope=alpha").text
    assert "s-kyoto" in page.get(f"/conversations?scope=alpha&day={DAY}").text
    assert "We fly to Kyoto" in page.get("/session?scope=alpha&id=s-kyoto").text


def test_journal_pages_from_the_database(mem: Memory) -> None:
    seed(mem)
    for i in range(60):
        mem.remember(f"Journal filler fact number {i} about topic {i * 7}.", scope="alpha")
    page = Page(mem)
    first = page.get("/journal?scope=alpha&kind=write").text
    assert first.count('class="ev-write"') == 50
    older = re.search(r'href="(/journal\?[^"]*before=\d+[^"]*)"', first)
    assert older, "an older page is linked"
    second = page.get(older.group(1).replace("&amp;", "&")).text
    assert second.count('class="ev-write"') == 63 - 50
    ids_first = set(re.findall(r"<tr class=\"ev-write\"><td>(\d+)", first))
    ids_second = set(re.findall(r"<tr class=\"ev-write\"><td>(\d+)", second))
    assert ids_first and ids_second and not ids_first & ids_second


def test_conflicts_keep_both_and_supersede(mem: Memory) -> None:
    s = seed(mem)
    a = mem.remember("The standup is at 9:30 every weekday.", scope="alpha").id
    b = mem.remember("The standup moved to 10:00 on weekdays.", scope="alpha").id
    with mem.store.transaction() as c:  # as DREAM's comb records a contradiction
        mem.store.add_edge(c, b, a, "contradicts", 1.0, 1_800_000_000.0)
        mem.store.add_edge(c, s.porto, s.lisbon, "contradicts", 1.0, 1_800_000_001.0)
    page = Page(mem)
    html = page.get("/conflicts?scope=alpha").text
    assert f'id="pair-{b}-{a}"' in html and "The standup moved to 10:00" in html
    assert page.get("/conflicts?scope=beta").text.count('class="pair"') == 0
    res = page.post("/conflicts/resolve?scope=alpha",
                    {"src": b, "dst": a, "action": "supersede", "keep": b})
    assert res.status_code == 303
    assert mem.get(a, scope="alpha").status == "superseded"
    assert rows(mem, "SELECT type FROM edges WHERE src = ? AND dst = ? ORDER BY type",
                (b, a)) == [("contradicts",), ("supersedes",)]
    page.post("/conflicts/resolve?scope=alpha",
              {"src": s.porto, "dst": s.lisbon, "action": "keep_both"})
    assert rows(mem, "SELECT type FROM edges WHERE src = ? AND dst = ?",
                (s.porto, s.lisbon)) == [("related",)]
    assert mem.get(s.lisbon, scope="alpha").status != "superseded"
    assert page.get("/conflicts?scope=alpha").text.count('class="pair"') == 0
    done = [e["data"]["action"]
            for e in mem.events(kinds=["conflict_resolved"], all_scopes=True)]
    assert sorted(done) == ["keep_both", "supersede"]
    again = page.post("/conflicts/resolve?scope=alpha",
                      {"src": s.porto, "dst": s.lisbon, "action": "keep_both"})
    assert again.status_code == 404


def test_state_changes_need_post_csrf_and_this_origin(mem: Memory) -> None:
    s = seed(mem)
    page = Page(mem)
    url = f"/memory/{s.porto}/reflect?scope=alpha"
    assert page.client.get(url).status_code == 405
    assert page.post(url, {"reward": "up"}, csrf=False).status_code == 403
    assert page.post(url, {"reward": "up", "csrf": "forged"}).status_code == 403
    assert page.post(url, {"reward": "up"}, origin="http://evil.example").status_code == 403
    assert page.post(url, {"reward": "up"}, origin="null").status_code == 403
    assert page.post(url, {"reward": "up"}, origin=None).status_code == 403  # no Origin
    ok_referer = page.post(url, {"reward": "up"}, origin=None,
                           headers={"Referer": f"{ORIGIN}/memory/{s.porto}"})
    assert ok_referer.status_code == 303
    assert mem.get(s.porto, scope="alpha").reinforcements == 1  # only the last one acted
    # DNS rebinding: a foreign name pointed at this address is refused on every request.
    assert page.get("/", headers={"Host": "evil.example:8766"}).status_code == 421
    assert page.get("/", headers={"Host": "localhost:8766"}).status_code == 200
    res = page.get("/")
    assert "script-src 'self'" in res.headers["content-security-policy"]
    assert "unsafe-inline" not in res.headers["content-security-policy"]


def test_map_draws_the_projects_clusters_with_the_reports_svg(mem: Memory) -> None:
    seed(mem)
    for i in range(12):
        mem.write(f"Alpha release checklist item {i}: sign the build and tag it.",
                  scope="alpha", entities_role="Mira=release+sign; Tom=review")
        mem.remember(f"Beta garden note {i}: water the tomatoes at dawn.", scope="beta")
    for step in ("clusters", "topics", "entities"):
        mem.sleep(only=step, force=True)
    page = Page(mem)
    alpha = page.get("/map?scope=alpha").text
    assert 'data-chart="clusters"' in alpha and 'data-chart="attention"' in alpha
    assert "[alpha]" in alpha and "[beta]" not in alpha
    assert "tomatoes" not in alpha.split('aria-label="topics"')[1].split("</section>")[0]
    assert "Mira" in alpha and "Mira — Tom" in alpha  # the entity graph
    assert "[beta]" in page.get("/map?scope=*").text
