"""docs/sleep.md documents every step, command and setting; the curve figure is current."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tideline.config import Dynamics, SleepTuning
from tideline.sleep.curve import svg
from tideline.sleep.orchestrate import STEPS

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = (DOCS / "sleep.md").read_text("utf-8")


def test_every_step_command_and_setting_is_documented() -> None:
    for step in STEPS:
        assert f"| `{step}` |" in DOC, step
    for command in ("tideline sleep", "tideline sleep --only", "tideline sleep --force",
                    "python -m tideline.sleep", "tideline report", "--html",
                    "tideline heatmap", "tideline scan"):
        assert command in DOC, command
    for f in dataclasses.fields(SleepTuning):
        assert f"| `{f.name}` |" in DOC, f.name
    for f in dataclasses.fields(Dynamics):
        assert f"| `{f.name}` |" in DOC, f.name
    for api in ("mem.sleep()", "mem.attention_heatmap()", "mem.report(", "mem.scan_unindexed()"):
        assert api in DOC, api


def test_the_retention_figure_matches_the_code() -> None:
    on_disk = (DOCS / "retention.svg").read_text("utf-8")
    assert svg() in on_disk, "regenerate: python -m tideline.sleep.curve docs/retention.svg"
    assert "](retention.svg)" in DOC
