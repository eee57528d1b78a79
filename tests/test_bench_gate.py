"""The gate bench: its generated pairs and its report (hashing embedder, a few pairs)."""

from __future__ import annotations

import json
import os
from collections import Counter

from tideline.bench import gate


def test_generated_pairs_cover_every_language_and_category() -> None:
    pairs = gate.generate()
    counts = Counter((p.lang, p.category) for p in pairs)
    for lang in gate.LANGS:
        for category in ("restatement", "slot", "negation", "tail"):
            assert counts[(lang, category)] >= 8, (lang, category)
    # With the unrelated pairs (a quarter more per language) the default run has ≥ 600.
    assert len(pairs) + 3 * (200 // 4) >= 600
    assert all(p.first != p.then for p in pairs if p.category != "restatement")
    tails = [p for p in pairs if p.category == "tail"]
    for p in tails:  # far past 512 tokens, the same but for the last sentence
        same = len(os.path.commonprefix([p.first, p.then]))
        assert len(p.first) > (600 if p.lang == "zh" else 2000) and same >= len(p.first) - 60


def test_report_has_both_gates_and_the_paraphrase_rates() -> None:
    r = gate.run("hashing", seed=3, per_lang=12, store_sample=6)
    json.dumps(r)
    for side in ("after", "before"):
        assert set(r[side]["by_category"]) == set(gate.CATEGORIES)
        assert set(r[side]["by_language"]) == set(gate.LANGS)
    assert r["pairs"] == sum(r["pairs_by_language"].values())
    assert r["write_path_check"]["pairs"] == 6
    assert r["write_path_check"]["same_decision"] == 6  # the write path is the gate
    assert r["real_paraphrases"]["pairs"] == 34
    assert r["after"]["corrections_potentiated"] == 0
