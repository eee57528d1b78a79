"""Project detection: each rule, in order, and the rule that fired."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config
from tideline.errors import InvalidInput
from tideline.project import detect_project, project_for_directory, project_name_for
from tideline.write.validate import clean_name


def test_rules_in_order(tmp_path: Path) -> None:
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "api" / "src"
    sub.mkdir(parents=True)
    other = tmp_path / "orchard"
    other.mkdir()
    plain = tmp_path / "scratch dir"
    plain.mkdir()

    assert detect_project(cwd=sub, env={"TIDELINE_PROJECT": "zeta"}).rule == "TIDELINE_PROJECT"
    info = detect_project(cwd=plain, env={"CLAUDE_PROJECT_DIR": str(sub)})
    assert (info.name, info.rule) == ("atlas", "CLAUDE_PROJECT_DIR")
    info = detect_project(cwd=plain, env={"TERMINAL_CWD": str(other)})
    assert (info.name, info.rule) == ("orchard", "TERMINAL_CWD")
    info = detect_project(cwd=plain, env={"ZCODE_PROJECT_DIR": str(other)})
    assert (info.name, info.rule) == ("orchard", "ZCODE_PROJECT_DIR")
    info = detect_project(cwd=sub, env={})
    assert (info.name, info.rule) == ("atlas", "git_root")
    info = detect_project(cwd=plain, env={})
    assert (info.name, info.rule) == ("scratch dir", "cwd")
    assert detect_project(cwd=plain, env={}, explicit="beta").rule == "explicit"
    # A client variable pointing nowhere is ignored, not trusted.
    info = detect_project(cwd=sub, env={"CLAUDE_PROJECT_DIR": str(tmp_path / "gone")})
    assert info.rule == "git_root"


def test_unsafe_names_are_cleaned_and_home_is_global(tmp_path: Path) -> None:
    odd = tmp_path / "my<proj>!"
    odd.mkdir()
    name = project_name_for(odd)
    assert name is not None and "<" not in name and ">" not in name
    assert detect_project(cwd=Path.home(), env={}).rule in ("none", "git_root")
    assert detect_project(cwd="/", env={}).name is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_project_name_is_a_valid_scope_or_none(raw: str) -> None:
    """Whatever $TIDELINE_PROJECT or an explicit name holds, detection yields a scope the
    store accepts (or no project), so opening a memory never fails on it."""
    caps = Config().caps
    for info in (detect_project(cwd="/", env={"TIDELINE_PROJECT": raw}),
                 detect_project(cwd="/", env={}, explicit=raw or None),
                 project_for_directory(None, env={"TIDELINE_PROJECT": raw})):
        if info.name is not None:
            assert clean_name(info.name, "project", caps) == info.name
            assert info.name.casefold() != "global"


def test_global_means_no_project(tmp_path: Path) -> None:
    repo = tmp_path / "atlas"
    (repo / ".git").mkdir(parents=True)
    for value in ("global", "GLOBAL", " global "):
        info = detect_project(cwd=repo, env={"TIDELINE_PROJECT": value})
        assert (info.name, info.rule) == (None, "TIDELINE_PROJECT")
    assert detect_project(cwd=repo, env={}, explicit="global").name is None
    assert project_for_directory(repo, env={}).name == "atlas"
    assert project_for_directory(repo, env={"TIDELINE_PROJECT": "zeta"}).rule == \
        "TIDELINE_PROJECT"
    assert project_for_directory("", env={}).rule == "none"
    with Memory.open(tmp_path / "s", embedder=hashing(), project="global") as mem:
        assert mem.project is None and mem.project_info.rule == "explicit"
    with pytest.raises(InvalidInput):
        Memory.open(tmp_path / "s", embedder=hashing(), project="bad\x00name")
