"""HashingEmbedder: deterministic feature hashing."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tideline.embed import Embedder, HashingEmbedder, make_embedder
from tideline.errors import InvalidInput

TEXTS = [
    "The user prefers dark mode in the code editor.",
    "Der Nutzer bevorzugt im Editor den dunklen Modus.",
    "用户在代码编辑器里喜欢用深色模式。",
    "Пользователь предпочитает тёмную тему в редакторе.",
    "",
    "!!!",
]


@pytest.fixture(scope="module")
def emb() -> HashingEmbedder:
    return HashingEmbedder()


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_identity_and_protocol(emb: HashingEmbedder) -> None:
    assert emb.name == "hashing"
    assert emb.model == "hashing-v1"
    assert emb.dim == 384
    assert emb.marker == "hashing:hashing-v1/384"
    assert isinstance(emb, Embedder)
    assert HashingEmbedder(dim=64).marker == "hashing:hashing-v1/64"


def test_shape_dtype_norm(emb: HashingEmbedder) -> None:
    out = emb.embed_passages(TEXTS)
    assert out.shape == (len(TEXTS), 384)
    assert out.dtype == np.float32
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    q = emb.embed_query(TEXTS[0])
    assert q.shape == (384,)
    assert q.dtype == np.float32
    assert emb.embed_passages([]).shape == (0, 384)
    assert HashingEmbedder(dim=64).embed_passages(["a b c"]).shape == (1, 64)


def test_query_equals_passage(emb: HashingEmbedder) -> None:
    for text in TEXTS:
        assert np.array_equal(emb.embed_query(text), emb.embed_passages([text])[0])


def test_batch_equals_single(emb: HashingEmbedder) -> None:
    batch = emb.embed_passages(TEXTS)
    for i, text in enumerate(TEXTS):
        assert np.array_equal(batch[i], emb.embed_passages([text])[0])


def test_deterministic_across_processes(emb: HashingEmbedder) -> None:
    code = (
        "import sys\n"
        "from tideline.embed.hashing import HashingEmbedder\n"
        f"texts = {TEXTS!r}\n"
        "sys.stdout.write(HashingEmbedder().embed_passages(texts).tobytes().hex())\n"
    )
    expected = emb.embed_passages(TEXTS).tobytes().hex()
    for seed in ("1", "12345"):  # Python's hash() would differ between these
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout == expected


def test_pinned_buckets() -> None:
    """The algorithm is part of the marker ("hashing-v1"): changing it must bump the model."""
    vec = HashingEmbedder(dim=384).embed_query("hello")
    nonzero = np.flatnonzero(vec)
    # features: word "hello" + 5 padded trigrams "<he", "hel", "ell", "llo", "lo>"
    assert 1 <= len(nonzero) <= 6
    signature = [(int(i), int(np.sign(vec[i]))) for i in nonzero]
    assert signature == PINNED_HELLO


PINNED_HELLO = [(30, 1), (44, -1), (57, -1), (106, 1), (140, 1), (322, 1)]


def test_similar_closer_than_unrelated(emb: HashingEmbedder) -> None:
    cases = [
        (
            "The user prefers dark mode in the code editor.",
            "The user prefers a dark mode for the editor.",
            "Paris is the capital of France and has many museums.",
        ),
        (
            "Maria ist allergisch gegen Erdnüsse.",
            "Maria hat eine Allergie gegen Erdnüsse.",
            "Der Zug nach Hamburg fährt um acht Uhr ab.",
        ),
        (
            "У Марии аллергия на арахис.",
            "У Марии сильная аллергия на арахис.",
            "Поезд в Москву отправляется в восемь часов.",
        ),
        (
            "用户在代码编辑器里喜欢用深色模式。",
            "用户喜欢编辑器的深色模式。",
            "火车八点从上海出发。",
        ),
    ]
    for anchor, similar, unrelated in cases:
        a, s, u = emb.embed_passages([anchor, similar, unrelated])
        assert cos(a, s) > cos(a, u) + 0.2, anchor


def test_cjk_features(emb: HashingEmbedder) -> None:
    a, b, c = emb.embed_passages(["深色模式", "深色主题", "火车出发"])
    assert cos(a, b) > 0.2  # shares 深色 (bigram) and 深, 色 (unigrams)
    assert cos(a, b) > cos(a, c)
    # Japanese kana and Korean hangul are CJK runs too
    j1, j2 = emb.embed_passages(["ダークモードが好き", "ダークモードを使う"])
    assert cos(j1, j2) > 0.3
    k1, k2 = emb.embed_passages(["다크 모드를 좋아함", "다크 모드 사용"])
    assert cos(k1, k2) > 0.3
    # mixed script in one \w-run: "PostgreSQL数据库"
    m1, m2 = emb.embed_passages(["PostgreSQL数据库", "PostgreSQL 数据库"])
    assert cos(m1, m2) > 0.9


def test_case_and_width_insensitive(emb: HashingEmbedder) -> None:
    a, b, c = emb.embed_passages(["Dark Mode", "dark mode", "ＤＡＲＫ　ＭＯＤＥ"])
    assert cos(a, b) == pytest.approx(1.0, abs=1e-6)
    assert cos(a, c) == pytest.approx(1.0, abs=1e-6)


def test_empty_and_featureless_are_fixed_unit_vectors(emb: HashingEmbedder) -> None:
    """Documented: no features → a unit vector hashed from the stripped text."""
    empty, blank, bang, quest = emb.embed_passages(["", "  \n\t ", "!!!", "???"])
    for v in (empty, blank, bang, quest):
        assert np.all(np.isfinite(v))
        assert np.linalg.norm(v) == pytest.approx(1.0, abs=1e-6)
    assert np.array_equal(empty, blank)
    assert not np.array_equal(bang, quest)
    real = emb.embed_query("dark mode")
    assert abs(cos(empty, real)) < 0.5


def test_odd_input_does_not_crash(emb: HashingEmbedder) -> None:
    out = emb.embed_passages(["nul\x00byte", "lone \ud800 surrogate", "e\u0301", "a" * 100_000])
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_bad_arguments() -> None:
    emb = HashingEmbedder()
    with pytest.raises(InvalidInput):
        emb.embed_passages("a single string")
    with pytest.raises(InvalidInput):
        emb.embed_passages(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        emb.embed_query(None)  # type: ignore[arg-type]
    for dim in (0, 8, -1, 1 << 20, 3.5, True):
        with pytest.raises(InvalidInput):
            HashingEmbedder(dim=dim)  # type: ignore[arg-type]


def test_large_batch() -> None:
    emb = make_embedder("hashing")
    texts = [
        f"memory {i}: the user mentioned topic number {i % 97} at the meeting" for i in range(5000)
    ]
    out = emb.embed_passages(texts)
    assert out.shape == (5000, 384)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert not np.array_equal(out[0], out[1])
