"""Restatement reinforces: a retry replays, the same content stated later potentiates.

The retry window (``write_retry_window_s``, ``$TIDELINE_WRITE_RETRY_WINDOW_S``) is
crossed by backdating the stored key or by moving the write path's clock, never by
sleeping.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.backend import Backend, run
from tests.conftest import hashing

from tideline import Memory
from tideline.config import Config
from tideline.errors import InvalidInput

pytestmark = pytest.mark.backends

TEXT = "the atlas loader needs the region column mapped in schema.yaml"


def backdate_keys(mem: Memory, seconds: float) -> None:
    run(mem, "UPDATE write_keys SET created_at = created_at - ?", (seconds,))


def test_remember_twice_later_potentiates(mem: Memory) -> None:
    """Reproducer (issue 10, item 4): `remember X` twice was a replay forever."""
    first = mem.remember(TEXT)
    assert first.decision == "new" and not first.replayed
    retry = mem.remember(TEXT)
    assert retry.replayed and retry.id == first.id
    assert mem.get(first.id).reinforcements == 0  # a retry changes nothing
    backdate_keys(mem, mem.config.write_retry_window_s + 1)
    later = mem.remember(TEXT)
    assert (later.decision, later.replayed, later.id) == ("potentiate", False, first.id)
    assert mem.get(first.id).reinforcements == 1
    assert mem.introspect()["memories"] == 1
    # The window now runs from the restatement: at once again is a retry of it.
    again = mem.remember(TEXT)
    assert again.replayed and again.decision == "potentiate"
    assert mem.get(first.id).reinforcements == 1


def test_explicit_key_replays_for_good(mem: Memory) -> None:
    first = mem.remember(TEXT, idempotency_key="req-42")
    backdate_keys(mem, 10 * 365 * 86400.0)
    late = mem.remember(TEXT, idempotency_key="req-42")
    assert late.replayed and late.id == first.id
    assert mem.get(first.id).reinforcements == 0
    # The same content without the key is a restatement and reinforces.
    plain = mem.remember(TEXT)
    assert (plain.decision, plain.replayed) == ("potentiate", False)


def test_window_is_measured_with_the_writers_clock(mem: Memory) -> None:
    start = 1_900_000_000.0
    window = mem.config.write_retry_window_s
    mem._rt.writer.clock = lambda: start
    first = mem.remember(TEXT)
    mem._rt.writer.clock = lambda: start + window - 1
    assert mem.remember(TEXT).replayed
    mem._rt.writer.clock = lambda: start + window + 1
    later = mem.remember(TEXT)
    assert not later.replayed and later.decision == "potentiate" and later.id == first.id


def test_retry_window_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Config.load().write_retry_window_s == 600.0
    monkeypatch.setenv("TIDELINE_WRITE_RETRY_WINDOW_S", "30")
    assert Config.load().write_retry_window_s == 30.0
    monkeypatch.setenv("TIDELINE_WRITE_RETRY_WINDOW_S", "soon")
    with pytest.raises(InvalidInput, match="TIDELINE_WRITE_RETRY_WINDOW_S"):
        Config.load()
    monkeypatch.delenv("TIDELINE_WRITE_RETRY_WINDOW_S")
    for bad in (-1.0, float("nan"), True, "600"):
        with pytest.raises(InvalidInput, match="write_retry_window_s"):
            Config.load(write_retry_window_s=bad)


def test_zero_window_makes_every_restatement_count(tmp_path: Path, backend: Backend) -> None:
    cfg = dataclasses.replace(Config.load(home=tmp_path / "s"), write_retry_window_s=0.0)
    with Memory.open(config=cfg, embedder=hashing(), project="global") as mem:
        backend.check(mem)
        ids = {mem.remember(TEXT).id for _ in range(3)}
        assert len(ids) == 1 and mem.get(ids.pop()).reinforcements == 2


TEXTS = ("the atlas loader needs the region column mapped",
         "Mira takes her coffee black with no sugar",
         "orchard 2.5 ships with traditional chinese strings")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, len(TEXTS) - 1), st.integers(0, 1500)),
                min_size=1, max_size=12))
def test_replay_iff_within_the_window_of_the_last_counted_write(
    backend: Backend, ops: list[tuple[int, int]],
) -> None:
    """Model check: a write replays exactly when the same content was last *counted*
    (not replayed) at most ``window`` seconds before; every counted restatement adds
    one reinforcement; no content is ever stored twice."""
    with tempfile.TemporaryDirectory() as tmp, \
            backend.open(Path(tmp) / "s", url=backend.fresh(), embedder=hashing(),
                         project="global") as mem:
        window = mem.config.write_retry_window_s
        now = 1_900_000_000.0
        last: dict[int, float] = {}
        counted: dict[int, int] = {}
        ids: dict[int, int] = {}
        for which, advance in ops:
            now += advance
            mem._rt.writer.clock = lambda t=now: t
            res = mem.remember(TEXTS[which])
            expect_replay = which in last and now - last[which] <= window
            assert res.replayed == expect_replay
            assert ids.setdefault(which, res.id) == res.id
            if not res.replayed:
                last[which] = now
                counted[which] = counted.get(which, 0) + 1
        for which, n in counted.items():
            assert mem.get(ids[which]).reinforcements == n - 1
        assert mem.introspect()["memories"] == len(counted)
