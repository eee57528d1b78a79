"""`tideline ui`'s defences over HTTP: the token rules of ``serve --http``, stored text as
data (the XSS corpus), hostile query strings, the DREAM plan reviewed before anything
changes, and the real command on loopback."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient
from tests.conftest import hashing
from tests.dream.helpers import LLMServer, answer, dump, serve
from tests.dream.helpers import settings as dream_settings
from tests.ui.helpers import ORIGIN, Page, seed
from tests.ui.xss import RAW, TEMPLATE, plant

from tideline import Memory
from tideline.errors import InvalidInput
from tideline.ui.app import build_app

TOKEN = "a-long-enough-ui-token-0123456789"  # noqa: S105 - a test token


@pytest.fixture
def openai_server() -> Iterator[LLMServer]:
    yield from serve("openai")


def test_token_rules_are_those_of_serve_http(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="requires a bearer token"):
        build_app(mem, host="0.0.0.0", port=8766)  # noqa: S104 - the refusal is the test
    with pytest.raises(InvalidInput, match="at least 16"):
        build_app(mem, host="10.0.0.5", port=8766, token="short")
    app = build_app(mem, host="10.0.0.5", port=8766, token=TOKEN)
    client = TestClient(app, base_url="http://10.0.0.5:8766")
    assert client.get("/").status_code == 401
    assert client.get("/?token=wrong-token-of-enough-length").status_code == 401
    first = client.get(f"/journal?token={TOKEN}&scope=global", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/journal?scope=global"
    assert "HttpOnly" in first.headers["set-cookie"] and "SameSite=Strict" in \
        first.headers["set-cookie"]
    assert client.get("/journal?scope=global").status_code == 200  # the cookie now
    bearer = TestClient(app, base_url="http://10.0.0.5:8766")
    assert bearer.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert bearer.get("/", headers={"Host": "evil.example"}).status_code == 421
    # A token given on loopback is enforced too.
    local = TestClient(build_app(mem, host="127.0.0.1", port=8766, token=TOKEN),
                       base_url=ORIGIN)
    assert local.get("/").status_code == 401


def test_xss_corpus_renders_as_text_everywhere(mem: Memory) -> None:
    ids = plant(mem)
    page = Page(mem)
    urls = [f"/memory/{ids['hostile']}?scope=alpha", f"/memory/{ids['big']}?scope=alpha",
            "/?scope=alpha&q=xss+gesture+script", "/?scope=alpha&q=xss+reply",
            "/conversations?scope=alpha&day=2024-06-11", "/journal?scope=alpha",
            "/map?scope=alpha", "/?scope=alpha&q=" + "%3Cscript%3Ealert(1)%3C%2Fscript%3E"]
    session = re.search(r'href="(/session\?[^"]+)"',
                        page.get("/conversations?scope=alpha&day=2024-06-11").text)
    assert session, "the hostile session is listed"
    urls.append(session.group(1).replace("&amp;", "&"))
    for url in urls:
        res = page.get(url)
        assert res.status_code == 200, url
        # Form fields hold the text as it is (escaped), so that an edit saves it unchanged.
        outside = re.sub(r"<textarea[^>]*>.*?</textarea>|value=\"[^\"]*\"", "", res.text,
                         flags=re.S)
        for raw in RAW:
            assert raw not in (outside if raw == "\u202e" else res.text), (url, raw)
    memory = page.get(urls[0]).text
    assert "&lt;script&gt;window.__xss = 1" in memory
    assert "invoice⟨U+202E⟩gpj.exe" in memory  # the override is shown, not obeyed
    assert TEMPLATE.replace("{", "{") in memory  # a template expression stays text
    assert "49" not in re.sub(r"\d{3,}", "", memory.split("xss gesture", 1)[1][:300])
    big = page.get(urls[1])
    assert len(big.text) > 1_000_000 and "&lt;script&gt;" in big.text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["/", "/conversations", "/session", "/journal", "/memory/{}",
                        "/conflicts", "/dream/plan/{}"]),
       st.dictionaries(st.sampled_from(["q", "scope", "day", "id", "from", "kind", "memory",
                                        "before", "since", "until", "group", "turn"]),
                       st.text(max_size=40), max_size=4),
       st.text(max_size=30))
def test_hostile_query_strings_get_an_answer_never_a_crash(
        fuzz_page: Page, path: str, params: dict[str, str], segment: str) -> None:
    url = path.format(quote(segment, safe="") or "x")
    res = fuzz_page.get(url, params=params)
    assert res.status_code in (200, 400, 404, 405, 413), (url, params, res.text[:300])
    for value in [*params.values(), segment]:
        if "<" in value and len(value) > 3:
            assert value not in res.text, (url, params)


@pytest.fixture(scope="module")
def fuzz_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    os.environ.pop("TIDELINE_DATABASE_URL", None)
    mem = Memory.open(tmp_path_factory.mktemp("fuzz"), embedder=hashing(), project="alpha")
    seed(mem)
    try:
        yield Page(mem)
    finally:
        mem.close()


def test_dream_plan_changes_nothing_until_the_approved_items_are_applied(
        mem: Memory, openai_server: LLMServer) -> None:
    s = seed(mem)
    openai_server.replies.append(answer({
        "weights": [{"memory_id": s.lisbon, "importance": 5, "reason": "where the user lives"}],
        "conflicts": [{"memory_id": s.porto, "other_id": s.lisbon, "relation": "contradicts",
                       "reason": "a test pair"}],
        "profiles": [], "self_concept": [], "threads": []}))
    page = Page(mem, dream_settings=dream_settings(
        provider="openai", url=openai_server.url, model="test-model", api_key="sk-test",
        backoff=0.0))
    before = dump(mem)
    res = page.post("/dream/plan?scope=alpha", {"layer": "comb"})
    assert res.status_code == 303, res.text
    plan = page.get(res.headers["location"]).text
    assert 'value="weights:0"' in plan and 'value="conflicts:0"' in plan
    assert f"#{s.lisbon} importance 3→5" in plan and "contradicts" in plan
    assert dump(mem) == before  # planned, shown, nothing changed
    assert openai_server.requests, "the plan came through the real provider path"
    pid = res.headers["location"].split("/dream/plan/")[1].split("?")[0]
    done = page.post(f"/dream/plan/{pid}/apply?scope=alpha", {"item": "weights:0"})
    assert done.status_code == 303
    assert mem.get(s.lisbon, scope="alpha").importance == 5
    assert not [e for e in mem.store.edges_of([s.lisbon]) if e.type == "contradicts"]
    assert "applied" in page.get(done.headers["location"]).text
    assert page.post(f"/dream/plan/{pid}/apply?scope=alpha", {}).status_code == 400
    kinds = {e["kind"] for e in mem.events(kinds=["dream_call", "dream_apply"])}
    assert kinds == {"dream_call", "dream_apply"}


def test_an_agents_pasted_answer_is_reviewed_then_rejected(mem: Memory) -> None:
    s = seed(mem)
    page = Page(mem)
    before = dump(mem)
    payload = answer({"weights": [{"memory_id": s.porto, "recurrence": 4, "reason": "monthly"}],
                      "conflicts": [], "profiles": [], "self_concept": [], "threads": []})
    res = page.post("/dream/plan?scope=alpha", {"layer": "comb", "payload": payload})
    assert res.status_code == 303
    pid = res.headers["location"].split("/dream/plan/")[1].split("?")[0]
    assert f"#{s.porto} recurrence 1→4" in page.get(res.headers["location"]).text
    assert page.post(f"/dream/plan/{pid}/reject?scope=alpha", {}).status_code == 303
    assert page.get(f"/dream/plan/{pid}?scope=alpha").status_code == 404
    assert dump(mem) == before
    bad = page.post("/dream/plan?scope=alpha", {"layer": "comb", "payload": "{not json"})
    assert bad.status_code == 400


def test_the_file_dream_apply_takes_is_loaded_checked_like_the_cli_then_applied(
        mem: Memory) -> None:
    from tideline.dream.errors import LLMOutputInvalid

    s = seed(mem)
    page = Page(mem)
    before = dump(mem)
    body = answer({"weights": [{"memory_id": s.porto, "recurrence": 4, "reason": "monthly"}],
                   "conflicts": [], "profiles": [], "self_concept": [], "threads": []})
    fenced = f"Here is the plan:\n```json\n{body}\n```\n".encode()  # as agents write it

    def upload(data: bytes, name: str = "answer.json") -> Any:
        return page.post("/dream/plan?scope=alpha", {"layer": "comb"},
                         files={"file": (name, data, "application/json")})

    res = upload(fenced)
    assert res.status_code == 303, res.text[:500]
    shown = page.get(res.headers["location"]).text
    assert f"#{s.porto} recurrence 1→4" in shown and "agent" in shown
    assert dump(mem) == before  # loaded and shown: nothing changed
    # What `tideline dream apply comb FILE` refuses, the page refuses with the same words.
    unknown = answer({"weights": [{"memory_id": 987654, "recurrence": 4, "reason": "x"}],
                      "conflicts": [], "profiles": [], "self_concept": [], "threads": []})
    with pytest.raises(LLMOutputInvalid) as cli:
        mem.apply_dream("comb", unknown, scope="alpha", dry_run=True)
    refused = upload(unknown.encode())
    assert refused.status_code == 400
    assert html.escape(cli.value.problems[0]) in refused.text
    assert upload(b"\xff\xfe{}").status_code == 400  # not UTF-8, as the CLI says
    assert upload(b"[1, 2]").status_code == 400
    assert dump(mem) == before
    pid = res.headers["location"].split("/dream/plan/")[1].split("?")[0]
    done = page.post(f"/dream/plan/{pid}/apply?scope=alpha", {"item": "weights:0"})
    assert done.status_code == 303
    assert mem.get(s.porto, scope="alpha").recurrence == 4


_ITEM = st.fixed_dictionaries({"memory_id": st.one_of(st.integers(-3, 2**64), st.text(max_size=5)),
                                "recurrence": st.one_of(st.integers(-9, 9), st.none()),
                                "reason": st.text(max_size=20)})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    st.dictionaries(st.sampled_from(["weights", "conflicts", "profiles", "threads", "x"]),
                    st.lists(_ITEM, max_size=2), max_size=4).map(
                        lambda d: answer(d).encode())))
def test_any_uploaded_answer_is_a_plan_or_a_refusal_never_a_crash(
        fuzz_page: Page, data: bytes) -> None:
    res = fuzz_page.post("/dream/plan?scope=alpha", {"layer": "comb"},
                         files={"file": ("answer.json", data, "application/json")})
    assert res.status_code in (303, 400), res.text[:300]
    assert "Traceback" not in res.text


def test_the_command_serves_on_loopback_and_refuses_other_hosts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TIDELINE_DATABASE_URL", "TIDELINE_MCP_TOKEN")}
    env.update(PYTHONPATH=os.pathsep.join(sys.path), TIDELINE_PROJECT="alpha")
    from typer.testing import CliRunner

    from tideline.cli import app, ui  # noqa: F401 - registers the command

    refused = CliRunner().invoke(app, ["ui", "--store", str(tmp_path), "--host", "0.0.0.0",
                                       "--embedder", "hashing"], env=env)
    assert refused.exit_code != 0 and "requires a bearer token" in refused.output
    proc = subprocess.Popen(
        [sys.executable, "-m", "tideline", "ui", "--store", str(tmp_path), "--port", "0",
         "--embedder", "hashing", "--namespace", "work"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr
                            else "")
        page = httpx.get(url.group(0), timeout=30)
        assert page.status_code == 200 and 'data-namespace="work"' in page.text
        assert "showing <b>alpha (with global)</b>" in page.text
        port = url.group(0).rsplit(":", 1)[1].rstrip("/")
        rebound = httpx.get(url.group(0), headers={"Host": f"attacker.example:{port}"},
                            timeout=30)
        assert rebound.status_code == 421
        assert "default-src 'none'" in page.headers["content-security-policy"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_asking_the_model_without_a_provider_says_so_not_a_server_error(mem: Memory) -> None:
    """With no DREAM provider configured, "ask the configured model" is the request's to
    fix: a 400 that names the DREAM error, not a 500; nothing is stored."""
    seed(mem)
    page = Page(mem, dream_settings=dream_settings())
    before = dump(mem)
    res = page.post("/dream/plan?scope=alpha", {"layer": "comb"})
    assert res.status_code == 400, res.status_code
    assert "dream_error" in res.text
    assert dump(mem) == before
