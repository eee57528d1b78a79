"""`python -m tideline.bench hooks`: what it measures and how each prompt was served.

Timings are printed, never asserted; the test checks the rounds' shape and that the
first prompt of each session was served by the warm server (the hook waited for it).
"""

from __future__ import annotations

from tideline.bench.hooks import TARGETS, run


def test_hooks_bench_rounds_are_served_as_described() -> None:
    out = run(2, embedder="hashing", memories=8)
    figures = out["figures"]
    assert {k: v["n"] for k, v in figures.items()} == {
        "bare": 4, "session_start": 4, "first_prompt_at_once": 2, "later_prompt": 6,
        "first_prompt": 2, "first_cjk_prompt": 2, "prompt_in_process": 2,
        "cjk_prompt_in_process": 2, "cjk_terms_in_process": 2}
    assert figures["bare"]["x_bare"] == 1.0
    assert set(out["targets"]) == set(TARGETS)
    # Per round: the at-once prompt, three later ones, the typed first prompt and the first
    # Chinese one are warm; only the TIDELINE_WARM=off prompts load the embedder in their
    # own process.
    assert out["served_by"] == {"warm": 12, "process": 4}
    assert out["machine"]["cpus"]
