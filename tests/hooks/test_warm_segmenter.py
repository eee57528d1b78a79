"""Issue 28 §2.7: the first Chinese/Japanese query of a session does not load jieba.

jieba's dictionary costs about a second to load, paid by the first CJK query of a
process. The warm hook process of a store that holds CJK text now loads it ahead (on a
thread, as soon as its socket answers, so a first English prompt does not wait), and
jieba keeps its built dictionary in a per-user cache folder (``$XDG_CACHE_HOME/tideline``)
rather than the shared /tmp. The proof is the cache file a real warm server writes there
without being asked a CJK query; a store without CJK text never loads it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tests.conftest import hashing

from tideline import Memory
from tideline.hooks import warm


def _serve(store: Path, monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setenv("TIDELINE_WARM", "always")
    monkeypatch.setenv("TIDELINE_WARM_IDLE", "120")
    assert warm.spawn(store, "default")
    deadline = time.monotonic() + 180
    while not warm.alive(store, "default"):
        assert time.monotonic() < deadline, "the warm server did not come up"
        time.sleep(0.2)


@pytest.mark.parametrize("cjk", [True, False])
def test_the_warm_process_loads_the_segmenter_ahead_for_a_cjk_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cjk: bool) -> None:
    store, cache = tmp_path / "store", tmp_path / "cache"
    with Memory.open(store, embedder=hashing(), project="atlas") as mem:
        mem.write("atlas release notes are written on Fridays", scope="atlas")
        if cjk:
            mem.write("服务器部署在上海的机房", scope="atlas")
    built = cache / "tideline" / "jieba.cache"
    _serve(store, monkeypatch, cache)
    try:
        if cjk:
            deadline = time.monotonic() + 180
            while not built.exists():
                assert time.monotonic() < deadline, "jieba was not loaded ahead"
                time.sleep(0.2)
            assert oct((cache / "tideline").stat().st_mode & 0o777) == "0o700"
    finally:
        warm.stop(store, "default")
    assert built.exists() is cjk
