"""Issue 11, path safety: no writes through symlinks or outside the target, atomic replace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.archive.helpers import open_store

from tideline.archive.paths import atomic_file, inside
from tideline.errors import InvalidInput, UnsafePath


@pytest.fixture
def mem(tmp_path: Path):
    m = open_store(tmp_path / "A")
    m.remember("../../etc/passwd is not a file name")
    m.remember("a memory with a / slash and a | pipe and ``` fences")
    yield m
    m.close()


def test_symlinked_target_is_refused_and_untouched(mem, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    link = tmp_path / "out.jsonl"
    link.symlink_to(victim)
    with pytest.raises(UnsafePath, match="symlink"):
        mem.export(link)
    assert victim.read_text("utf-8") == "keep me" and link.is_symlink()


def test_symlinked_parent_is_refused(mem, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real, target_is_directory=True)
    with pytest.raises(UnsafePath):
        mem.export(tmp_path / "via" / "a.jsonl")
    with pytest.raises(UnsafePath):
        mem.export(tmp_path / "via" / "md", format="markdown")
    with pytest.raises(UnsafePath):
        mem.migrate(tmp_path / "via" / "store")
    assert list(real.iterdir()) == []


def test_export_replaces_atomically_and_leaves_no_temp(mem, tmp_path: Path) -> None:
    target = tmp_path / "a.jsonl"
    target.write_text("old archive", encoding="utf-8")
    mem.export(target)
    assert target.read_text("utf-8").startswith('{"format":"tideline-archive"')
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "a.jsonl"
    target.write_text("old", encoding="utf-8")
    with pytest.raises(RuntimeError), atomic_file(target) as f:
        f.write(b"half of something new")
        raise RuntimeError("the export failed midway")
    assert target.read_text("utf-8") == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


def test_missing_parent_or_directory_target(mem, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        mem.export(tmp_path / "nope" / "a.jsonl")
    with pytest.raises(InvalidInput, match="is a directory"):
        mem.export(tmp_path)
    with pytest.raises(InvalidInput, match="format"):
        mem.export(tmp_path / "a.txt", format="csv")


def test_inside_refuses_names_that_leave_the_root(tmp_path: Path) -> None:
    for name in ("..", ".", "", "a/b", "..\\x", "a\x00"):
        with pytest.raises(UnsafePath):
            inside(tmp_path, name)


def test_markdown_names_come_from_ids_only(mem, tmp_path: Path) -> None:
    out = tmp_path / "md"
    res = mem.export(out, format="markdown")
    assert res["memories"] == 2
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["index.md", "memories/1.md", "memories/2.md"]
    index = (out / "index.md").read_text("utf-8")
    assert "[1](memories/1.md)" in index and "\\| pipe" in index
    page = (out / "memories" / "2.md").read_text("utf-8")
    assert page.startswith("# Memory 2") and "```text" in page
    assert page.count("```") == 2  # the stored fence cannot close the block
    for p in out.rglob("*"):
        assert os.path.realpath(p).startswith(os.path.realpath(out))
    again = mem.export(out, format="markdown")  # re-export replaces in place
    assert again["memories"] == 2


def test_archive_is_private_to_its_owner(mem, tmp_path: Path) -> None:
    target = tmp_path / "a.jsonl"
    mem.export(target)
    assert target.stat().st_mode & 0o777 == 0o600
