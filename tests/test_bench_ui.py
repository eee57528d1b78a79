"""The UI bench: every page answers over a generated store, and a kept store is reused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tideline.bench.ui import main, run


def test_every_page_is_timed_over_a_generated_store(tmp_path: Path) -> None:
    home = tmp_path / "store"
    res = run(home, 120, 160, 2, build=True, sleep=False, recalls=5)
    assert set(res["pages"]) == {"search", "memory", "conversations", "session", "journal",
                                 "conflicts", "dream", "map"}
    assert res["store"]["memories"] == 120 and res["store"]["turns"] == 160
    assert all(p["p50_ms"] > 0 for p in res["pages"].values())


def test_a_kept_store_is_loaded_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "keep"
    main(["--n", "60", "--turns", "40", "--runs", "1", "--recalls", "3", "--keep", str(keep)])
    first = json.loads(capsys.readouterr().out.splitlines()[-1])
    main(["--n", "60", "--turns", "40", "--runs", "1", "--recalls", "3", "--keep", str(keep)])
    second = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert first["load"] and not second["load"]  # the second run only times the pages
    assert second["store"]["memories"] == 60
