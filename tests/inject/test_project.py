"""Project detection: each rule, in order, and the rule that fired."""

from __future__ import annotations

from pathlib import Path

from tideline.project import detect_project, project_name_for


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
