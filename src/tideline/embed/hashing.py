"""A deterministic, model-free embedder based on feature hashing.

Features of a text (after NFKC normalisation and casefolding):

* word unigrams (runs of ``\\w`` outside CJK scripts),
* character 3-grams of each such word, padded as ``<word>``,
* for CJK runs (Han, kana, Hangul): character bigrams and single characters.

Each feature is hashed with keyed BLAKE2b (stable across processes and
platforms, unlike :func:`hash`) to a bucket and a sign; the weight is
sublinear in the term frequency (``1 + ln tf``) and the vector is
L2-normalised. Queries and passages are embedded identically.

A text with no features (empty, whitespace or punctuation only) is hashed as
one feature made of its stripped, normalised characters, so it still gets a
*unit* vector: every empty/whitespace-only text maps to the same fixed unit
vector, and ``"???"`` differs from ``"!!!"``. No output is ever zero or NaN.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from tideline.embed.base import (
    ThresholdProfile,
    Vectors,
    check_texts,
    clean_text,
    format_marker,
)
from tideline.errors import InvalidInput

__all__ = ["HashingEmbedder"]

_KEY = b"tideline-hashing-v1"
_WORD = re.compile(r"\w+")
_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
    r"\u1100-\u11ff\u3130-\u318f\U00020000-\U0002fa1f]+"
)

# Relative feature weights (before the sublinear tf and the final L2 norm).
_W_WORD = 1.0
_W_TRIGRAM = 0.8
_W_BIGRAM = 1.0
_W_UNIGRAM = 1.0
_W_RAW = 1.0
_WEIGHT = {"w": _W_WORD, "c": _W_TRIGRAM, "b": _W_BIGRAM, "u": _W_UNIGRAM, "r": _W_RAW}


@lru_cache(maxsize=1 << 17)
def _bucket(feature: str, dim: int) -> tuple[int, float]:
    """Stable bucket index and sign of a feature."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, key=_KEY).digest()
    h = int.from_bytes(digest, "little")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


def _features(text: str) -> dict[str, int]:
    """Map a text to ``{feature: term frequency}``; the first char is the kind."""
    norm = unicodedata.normalize("NFKC", text).casefold()
    counts: dict[str, int] = {}
    for token in _WORD.findall(norm):
        pos = 0
        for m in _CJK.finditer(token):
            _latin(token[pos : m.start()], counts)
            run = m.group()
            for ch in run:
                key = "u" + ch
                counts[key] = counts.get(key, 0) + 1
            for i in range(len(run) - 1):
                key = "b" + run[i : i + 2]
                counts[key] = counts.get(key, 0) + 1
            pos = m.end()
        _latin(token[pos:], counts)
    if not counts:
        counts["r" + norm.strip()] = 1
    return counts


def _latin(word: str, counts: dict[str, int]) -> None:
    """Add a non-CJK word and its padded character 3-grams."""
    if not word:
        return
    key = "w" + word
    counts[key] = counts.get(key, 0) + 1
    padded = f"<{word}>"
    for i in range(len(padded) - 2):
        key = "c" + padded[i : i + 3]
        counts[key] = counts.get(key, 0) + 1


class HashingEmbedder:
    """Feature-hashing embedder: fast, deterministic, needs no model.

    Good enough for tests, demos and lexical-ish near-duplicate detection;
    it has no notion of synonyms or cross-lingual meaning.

    Args:
        dim: number of hash buckets (vector dimensionality), 16–65536.
    """

    name = "hashing"
    model = "hashing-v1"

    def __init__(self, dim: int = 384) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 16 <= dim <= 65536:
            raise InvalidInput(f"hashing embedder dim must be an int in 16..65536, got {dim!r}")
        self.dim = dim
        from tideline.embed.profiles import profile_for

        self.profile: ThresholdProfile = profile_for(self.name, self.model)

    @property
    def marker(self) -> str:
        return format_marker(self.name, self.model, self.dim)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def _embed_into(self, text: str, out: Vectors) -> None:
        dim = self.dim
        acc: dict[int, float] = {}
        for feature, tf in _features(text).items():
            idx, sign = _bucket(feature, dim)
            weight = _WEIGHT[feature[0]] * (1.0 + math.log(tf))
            acc[idx] = acc.get(idx, 0.0) + sign * weight
        if acc:
            out[list(acc)] = list(acc.values())
        norm = float(np.linalg.norm(out))
        if norm <= 1e-12:
            # Buckets cancelled exactly (vanishingly rare): use the raw feature.
            idx, sign = _bucket("r" + text, dim)
            out[:] = 0.0
            out[idx] = sign
            norm = 1.0
        out /= norm

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        items = check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            self._embed_into(text, out[row])
        return out

    def embed_query(self, text: str) -> Vectors:
        out = np.zeros(self.dim, dtype=np.float32)
        self._embed_into(clean_text(text), out)
        return out
