"""Token estimates, clipping and the injection settings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tideline.errors import InvalidInput
from tideline.inject.budget import clip_lines, clip_text, estimate_tokens
from tideline.inject.tuning import InjectTuning


def test_estimate_tokens_latin_and_cjk() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("记忆系统") == 4
    assert estimate_tokens("记忆 abcd") == 2 + 2  # two CJK + five other characters


@given(st.text(max_size=400), st.integers(min_value=0, max_value=120))
def test_clip_text_never_exceeds_budget(text: str, tokens: int) -> None:
    clipped = clip_text(text, tokens)
    assert estimate_tokens(clipped) <= max(tokens, 0) or clipped == ""
    if estimate_tokens(text) <= tokens:
        assert clipped == text


def test_clip_lines_keeps_whole_lines_then_cuts_one() -> None:
    lines = ["a" * 40, "b" * 40, "c" * 400]
    kept, clipped = clip_lines(lines, 40)
    assert kept[:2] == lines[:2] and clipped
    assert kept[2].startswith("c") and kept[2].endswith("…")
    assert sum(estimate_tokens(x) + 1 for x in kept) <= 40
    assert clip_lines(lines[:2], 100) == (lines[:2], False)


def test_tuning_env_overrides_and_validation() -> None:
    env = {"TIDELINE_INJECT_BRIEF_TOKENS": "3000", "TIDELINE_INJECT_T1_FLOOR": "0.82",
           "TIDELINE_INJECT_T2_MIN_WEIGHT": "0.5", "TIDELINE_INJECT_T1_FLOOR_FROM": "abstain"}
    t = InjectTuning.load(env)
    assert (t.brief_tokens, t.t1_floor, t.t2_min_weight, t.t1_floor_from) == (
        3000, 0.82, 0.5, "abstain")
    assert InjectTuning.load({"TIDELINE_INJECT_T1_FLOOR": "auto"}).t1_floor is None
    assert InjectTuning.load({}, t2_top=5).t2_top == 5
    defaults = InjectTuning()
    assert (defaults.t2_min_weight, defaults.t2_top, defaults.t3_clusters,
            defaults.t4_trigger) == (0.6, 3, 25, 2)
    with pytest.raises(InvalidInput):
        InjectTuning.load({"TIDELINE_INJECT_BRIEF_TOKENS": "many"})
    with pytest.raises(InvalidInput):
        InjectTuning.load({}, nonsense=1)
    with pytest.raises(InvalidInput):
        InjectTuning(t2_top=-1)
    with pytest.raises(InvalidInput):
        InjectTuning(t1_floor=3.0)
    with pytest.raises(InvalidInput):
        InjectTuning(t1_floor_from="median")
