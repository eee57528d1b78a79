"""The sleep/report/heatmap/scan commands as a user runs them, and the HTML in Chromium.

The commands run on both backends (tests/backend.py): on PostgreSQL every process finds
the database through ``TIDELINE_DATABASE_URL``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.backend import Backend

from tideline import Memory
from tideline.embed import HashingEmbedder

pytestmark = pytest.mark.backends

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def run(*args: str, store: Path, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing")
    proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store)],
                          capture_output=True, text=True, env=env, timeout=300)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def j(proc: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(proc.stdout)


def seed(store: Path) -> None:
    with Memory.open(store, embedder=HashingEmbedder()) as mem:
        for text, scope in [("atlas runs PostgreSQL 16 on pg-atlas-01", "atlas"),
                            ("the atlas loader fails with error E1234", "atlas"),
                            ("Mira reviews every schema migration", "global"),
                            ("kafka retention is seven days in orchard", "orchard"),
                            ("the violin lesson moved to thursday", "global")]:
            mem.write(text, scope=scope, tags=[scope], entities_role="Mira=审查; Bo=执行")
    for q in ("atlas database", "E1234"):
        run("recall", q, "--scope", "atlas", "--json", store=store)


def test_sleep_command_gate_only_and_errors(tmp_path: Path, backend: Backend) -> None:
    store = tmp_path / "s"
    seed(store)
    first = j(run("sleep", "--json", store=store))
    assert first["skipped"] is False and first["errors"] == {}
    assert set(first["steps"]) >= {"plasticity", "dynamics", "topics", "clusters", "scan"}
    second = j(run("sleep", "--json", store=store))
    assert second == {**second, "skipped": True, "reason": "unchanged"}
    only = j(run("sleep", "--only", "entities", "--json", store=store))
    assert list(only["steps"]) == ["entities"]
    forced = j(run("sleep", "--force", "--json", store=store))
    assert forced["skipped"] is False and forced["forced"] is True
    human = run("sleep", store=store)
    assert "sleep skipped (unchanged)" in human.stdout
    bad = run("sleep", "--only", "nap", store=store, ok=False)
    assert bad.returncode == 3 and bad.stderr.startswith("tideline: error: invalid_input")


def test_report_heatmap_scan_commands(tmp_path: Path, backend: Backend) -> None:
    store = tmp_path / "s"
    seed(store)
    run("sleep", "--json", store=store)
    rep = j(run("report", "--all-scopes", "--json", store=store))
    assert rep["totals"]["memories"] == 5 and rep["sleeps"]["count"] == 1
    text = run("report", "--all-scopes", store=store).stdout
    assert "NOVELTY GATE" in text and "reflect/recall" in text
    heat = j(run("heatmap", "--scope", "atlas", "--json", store=store))
    assert heat["total_hits"] > 0
    assert {c["scope"] for c in heat["clusters"]} <= {"atlas", "global"}
    everything = j(run("heatmap", "--all-scopes", "--json", store=store))
    assert "orchard" in {c["scope"] for c in everything["clusters"]}
    assert "hits in 30 days" in run("heatmap", store=store).stdout
    scan = j(run("scan", "--json", store=store))
    assert len(scan["track_a"]) == 5 and scan["markdown"].startswith("# Unindexed context")
    if not backend.is_sqlite:  # everything above came from the database
        assert not (store / "tideline.db").exists()


def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    assert Path(CHROMIUM).exists(), "Debian's chromium package is needed (apt-get install chromium)"
    store = tmp_path / "s"
    seed(store)
    run("sleep", "--json", store=store)
    for q in ("violin lesson", "kafka retention"):
        run("recall", q, "--scope", "orchard", "--json", store=store)
    page = tmp_path / "report.html"
    out = j(run("report", "--all-scopes", "--html", str(page), "--json", store=store))
    assert out["html"] == str(page) and page.stat().st_size > 10_000
    profile = tmp_path / "chromium-profile"
    dom = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-sync", f"--user-data-dir={profile}", "--virtual-time-budget=5000",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'data-rendered="yes"' in html  # the inline script ran
    charts = re.findall(r'<svg class="chart" data-chart="([a-z-]+)"', html)
    assert {"growth", "gate", "recalls", "latency", "retention-sleeps", "retention-model",
            "retention-histogram", "attention", "clusters"} <= set(charts)
    assert f'data-charts="{len(charts)}"' in html
    assert html.count('class="cell"') >= 30  # heatmap grid
    assert html.count('class="bubble"') >= 3  # cluster map
    assert html.count('<polyline class="series"') >= 4  # retention curves
    assert '<nav class="toc">' in html  # built by the script
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-sync", f"--user-data-dir={profile}", "--window-size=1100,2400",
         f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a blank page compresses to a few kB
