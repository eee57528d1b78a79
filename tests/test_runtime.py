"""The facade over its Runtime: one set of parts, swapped in one place, one scope policy."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import hashing

from tideline import Memory
from tideline.dream.context import LayerContext
from tideline.embed import HashingEmbedder
from tideline.project import ProjectInfo
from tideline.runtime import Runtime
from tideline.scopes import GLOBAL_KINDS, default_scope, visible_scopes


def test_the_facade_attributes_are_the_runtime_parts(mem: Memory) -> None:
    """``mem.store``, ``mem.embedder``… are the parts every verb works with, not copies."""
    rt = mem._rt
    assert isinstance(rt, Runtime)
    assert (mem.config, mem.store, mem.embedder, mem.embed_guard, mem.vectors) == (
        rt.config, rt.store, rt.embedder, rt.guard, rt.vectors)
    assert rt.writer.store is rt.store and rt.engine.store is rt.store
    assert rt.writer.vectors is rt.vectors and rt.engine.vectors is rt.vectors


def test_assigning_config_reaches_the_verbs(mem: Memory) -> None:
    """`tideline serve --agent-name` assigns ``mem.config``; the brief must show the name."""
    assert "long-term memory of Ada" not in mem.inject_brief(tiers=["T0"]).text
    mem.config = dataclasses.replace(mem.config, agent_name="Ada")
    assert mem._rt.config.agent_name == "Ada"
    assert "This is the long-term memory of Ada (you)." in mem.inject_brief(tiers=["T0"]).text


def test_use_project_moves_the_scope_of_every_verb(mem: Memory) -> None:
    """The runtime's project is the facade's: writes, reads and recall follow it."""
    mem.use_project(ProjectInfo("atlas", "explicit", "atlas"))
    assert mem.project == mem._rt.project == "atlas"
    mid = mem.remember("the atlas loader retries three times").id
    assert mem.get(mid).scope == "atlas"
    assert mem.remember("Mira likes short answers", kind="preference").scope == "global"
    mem.use_project(ProjectInfo("orchard", "explicit", "orchard"))
    assert mem._rt.project == "orchard"
    assert [i.id for i in mem.recall("atlas loader retries", log=False).items
            if i.type == "memory"] == []


def test_reembed_swaps_the_whole_runtime(mem: Memory) -> None:
    """After reembed every part uses the new embedder; the store and project stay."""
    mem.use_project(ProjectInfo("atlas", "explicit", "atlas"))
    mem.remember("the export job runs nightly at 02:00")
    before = mem._rt
    new = HashingEmbedder(dim=128)
    new.profile = hashing().profile
    mem.reembed(new)
    rt = mem._rt
    assert rt is not before
    assert rt.store is before.store and rt.project == "atlas" and rt.config is before.config
    assert mem.embedder is new and rt.guard.embedder is new
    assert rt.writer.embedder is new and rt.engine.embedder is new
    assert rt.vectors is not before.vectors
    written = mem.remember("Mira prefers green tea in the afternoon")
    assert written.decision == "new" and not written.vector_pending
    hits = mem.recall("export job nightly", log=False).items
    assert hits and hits[0].text.startswith("the export job")


names = st.from_regex(r"[a-z][a-z0-9_-]{0,20}", fullmatch=True)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scope=names, project=st.none() | names)
def test_one_scope_policy(mem: Memory, scope: str, project: str | None) -> None:
    """The facade, injection, sleep and dream read the same scopes for the same project
    (before, ``dream/context.py`` and ``inject/brief.py`` each had a ``scopes_for``, one
    answering None for None and the other ``["global"]``)."""
    mem.use_project(ProjectInfo(project, "explicit", project) if project
                    else ProjectInfo(None, "none"))
    rt = mem._rt
    assert visible_scopes(scope) == list(dict.fromkeys([scope, "global"]))
    assert rt.visible(None) == visible_scopes(project) == list(
        dict.fromkeys([project or "global", "global"]))
    assert rt.visible(scope) == visible_scopes(scope)
    assert LayerContext(layer="comb", scope=scope).scopes == visible_scopes(scope)
    assert LayerContext(layer="comb", scope=None).scopes is None  # dream: every scope
    assert mem.read_context(session="s1", scope=scope)["scope"] == scope
    for kind in (*GLOBAL_KINDS, "fact"):
        expected = "global" if kind in GLOBAL_KINDS else project or "global"
        assert rt.scope(None, write=True, kind=kind) == expected
        assert default_scope(project, write=True, kind=kind) == expected
