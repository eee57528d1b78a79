"""Issue 28 §2.4: an archive imported into a store that is not empty merges.

A laptop's SQLite store is exported and imported into a team store that already holds
memories, turns, journal, clusters (on SQLite and on a real PostgreSQL server): new
ids, every reference remapped, the id map reported, idempotent, all or nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.archive.helpers import open_store, populate, rewrite
from tests.archive.integrity import counts, dangling
from tests.backend import Backend, rows, run
from tests.conftest import hashing

from tideline.archive.exchange import archive_digest
from tideline.errors import ArchiveInvalid

pytestmark = pytest.mark.backends


@pytest.fixture(scope="module")
def laptop(tmp_path_factory: pytest.TempPathFactory):
    """One laptop store for the module (the first test adds one memory to it)."""
    mem = open_store(tmp_path_factory.mktemp("laptop") / "laptop")
    populate(mem)
    yield mem
    mem.close()


def _team(backend: Backend, tmp_path: Path):
    """A team store with rows of its own in every table an import touches."""
    return _fill(backend.open(tmp_path / "team", embedder=hashing(), project="global"))


def _fill(team):
    team.add_turns([{"session": "s1", "role": "user", "text": "team standup notes",
                     "timestamp": "2026-11-01T09:00:00Z", "id": "team-1"}],
                   scope="atlas", source="jsonl")
    team.remember("the team deploys on Tuesdays", scope="atlas")
    team.remember("the staging database is pg-stage-02", scope="atlas")
    team.recall("deploys", scope="atlas")
    team.add_thread("who owns staging", "ask ops")
    team.sleep(force=True)
    return team


def _texts(mem) -> dict[int, str]:
    return {int(i): str(g) for i, g in rows(mem, "SELECT id, gesture FROM memories")}


def test_laptop_into_a_team_store_merges(laptop, backend: Backend, tmp_path: Path) -> None:
    archive = tmp_path / "laptop.jsonl"
    laptop.export(archive)
    source = _texts(laptop)
    team = _team(backend, tmp_path)
    try:
        before, own = counts(team), _texts(team)
        res = team.import_archive(archive)
        assert res["merged"] is True and res["already_imported"] is False
        ids = {int(k): v for k, v in res["ids"]["memories"].items()}
        assert set(ids) == set(source)
        after = _texts(team)
        # every archived memory is there under its new id, the team's own are untouched
        assert all(after[ids[old]] == text for old, text in source.items())
        assert all(after[i] == text for i, text in own.items())
        assert not set(ids.values()) & set(own)
        assert res["remapped"]["memories"] >= 1
        grown = counts(team)
        assert grown["memories"] == before["memories"] + len(source)
        assert grown["turns"] == before["turns"] + 3
        assert dangling(team) == []
        # the revised memory still supersedes its old version, under the new ids
        sup = dict(rows(team, "SELECT id, supersedes FROM memories WHERE supersedes IS "
                              "NOT NULL"))
        src_sup = dict(rows(laptop, "SELECT id, supersedes FROM memories WHERE supersedes "
                                    "IS NOT NULL"))
        assert {ids[k]: ids[v] for k, v in src_sup.items()}.items() <= sup.items()
        # the new turn of the team's session s1 comes after the team's own turn
        places = rows(team, "SELECT message_id, turn_index FROM turns WHERE session = 's1' "
                            "ORDER BY turn_index")
        assert [m for m, _ in places][0] == "team-1" and len(places) == 3
        # recall finds the laptop's memories in the team store
        hit = team.recall("E4521 loader", scope="atlas", log=False)
        assert hit.items and "E4521" in hit.items[0].text

        # Idempotent: the same rows again (without the marker that says "done") add nothing.
        digest = archive_digest(team.store)
        run(team, "DELETE FROM db_meta WHERE key LIKE 'archive:%'")
        again = team.import_archive(archive)
        assert again["inserted"] == {}, again["inserted"]
        assert again["ids"]["memories"] == res["ids"]["memories"]
        assert archive_digest(team.store) == digest
        # A later archive of the laptop adds only what is new.
        laptop.remember(f"the loader now validates CSV headers ({backend.name} run)",
                        scope="atlas")
        later = tmp_path / "later.jsonl"
        laptop.export(later)
        more = team.import_archive(later)
        assert more["inserted"]["memories"] == 1 and "turns" not in more["inserted"]
        assert counts(team)["memories"] == grown["memories"] + 1
        assert dangling(team) == []
    finally:
        team.close()


def test_a_failed_merge_changes_nothing(laptop, backend: Backend, tmp_path: Path) -> None:
    """A row the database refuses (late in the archive) rolls the whole merge back."""
    archive = tmp_path / "bad.jsonl"
    laptop.export(archive)

    def bad_edge(header, rows_):
        for r in rows_:
            if r["t"] == "edges":
                r["r"]["type"] = "not-a-type"
                break
        return rows_

    rewrite(archive, bad_edge)
    team = _team(backend, tmp_path)
    try:
        digest = archive_digest(team.store)
        with pytest.raises(ArchiveInvalid):
            team.import_archive(archive)
        assert archive_digest(team.store) == digest
    finally:
        team.close()


def test_own_archive_after_changes_adds_nothing(backend: Backend, tmp_path: Path) -> None:
    """A store's own archive, imported after the store moved on, is recognised row by row."""
    mem = backend.open(tmp_path / "own", embedder=hashing(), project="global")
    try:
        populate(mem)
        archive = tmp_path / "own.jsonl"
        mem.export(archive)
        mem.recall("E4521 loader", scope="atlas")  # weights, last access and journal move on
        mem.sleep(force=True)
        before = counts(mem)
        res = mem.import_archive(archive)
        assert res["inserted"].get("memories", 0) == 0 and res["inserted"].get("turns", 0) == 0
        assert counts(mem) == before
        assert all(int(k) == v for k, v in res["ids"]["memories"].items())
    finally:
        mem.close()


def test_cli_reports_the_id_map(laptop, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from tideline.cli import agent, app, archive, commands  # noqa: F401 - registers

    archive_path = tmp_path / "laptop.jsonl"
    laptop.export(archive_path)
    _fill(open_store(tmp_path / "team", project="global")).close()
    monkeypatch.setenv("TIDELINE_EMBEDDER", "hashing")
    monkeypatch.delenv("TIDELINE_DATABASE_URL", raising=False)
    args = ["import", "tideline", str(archive_path), "--store", str(tmp_path / "team")]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["merged"] is True and len(out["ids"]["memories"]) == len(_texts(laptop))
    assert out["remapped"]["memories"] >= 1
    again = CliRunner().invoke(app, args)
    assert "already imported" in again.stdout
