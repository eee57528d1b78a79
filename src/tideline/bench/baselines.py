"""The plain baselines every recall bench reports beside the pipeline, in the same run.

Over the turns a store holds (their texts and the vectors the store keeps for them):
BM25 (``bm25s`` with the Snowball English stemmer, the ``bench`` extra), an exact
full-scan cosine over the stored turn vectors, and the reciprocal-rank fusion of the
two. A pipeline that ranks below a cosine over its own vectors, or below BM25 over its
own texts, adds nothing; these lists are what it is judged against.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Container, Mapping, Sequence

import numpy as np

from tideline.embed.base import Embedder
from tideline.models import Turn
from tideline.store.base import Store
from tideline.store.rows import turn_index_text

__all__ = ["Bm25", "TurnBaselines", "mean_rows", "ndcg10", "rrf"]


class Bm25:
    """BM25 over a list of texts (bm25s, Snowball English stemmer).

    Args:
        ids: one id per text, returned by :meth:`search`.
        texts: the texts.
    """

    def __init__(self, ids: list[str], texts: list[str]) -> None:
        import bm25s
        import Stemmer

        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        self.ids = ids
        self.model = bm25s.BM25()
        self.model.index(bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer,
                                        show_progress=False), show_progress=False)

    def search(self, query: str, k: int) -> list[str]:
        """The ids of the (at most) ``k`` best texts with a positive score, best first."""
        tokens = self._bm25s.tokenize([query], stopwords="en", stemmer=self._stemmer,
                                      show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self.model.retrieve(tokens, k=min(k, len(self.ids)),
                                           show_progress=False)
        return [self.ids[int(d)] for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


def rrf(*lists: Sequence[str], k: int = 60) -> list[str]:
    """Reciprocal-rank fusion of ranked id lists (``1 / (k + rank)`` summed)."""
    fused: dict[str, float] = {}
    for ranked in lists:
        for pos, tid in enumerate(ranked):
            fused[tid] = fused.get(tid, 0.0) + 1.0 / (k + pos + 1)
    return sorted(fused, key=lambda t: -fused[t])


class TurnBaselines:
    """BM25, full-scan cosine and their fusion over the turns of ``scopes`` in a store.

    The dense side ranks by the vectors the store keeps for the turns (each leaning
    towards the turn before it, :mod:`tideline.store.turn_embedding`), or with
    ``own`` by each turn's own text embedded alone (``"speaker: text"``, what a plain
    vector store would hold; cheap with a :mod:`~tideline.bench.embed_cache`).

    Args:
        store: the store (its turns and their stored vectors are read once).
        scopes: the scopes whose turns are ranked.
        dim: the embedder's dimension.
        own: embed the turns' own texts with this embedder for the dense side.
    """

    def __init__(self, store: Store, scopes: Sequence[str], dim: int,
                 own: Embedder | None = None) -> None:
        stored: list[Turn] = store.turns_between(list(scopes), -1e12, 1e12, 1_000_000)
        self.turns = stored
        self.message_of = {t.id: t.message_id for t in stored}
        if own is not None and stored:
            got = own.embed_passages([turn_index_text(t.speaker, t.text) for t in stored])
            vectors = {t.id: got[i] for i, t in enumerate(stored)}
        else:
            vectors = store.turn_vectors(stored, dim)
        self._keys = [t.id for t in stored if t.id in vectors]
        self._matrix = (np.stack([vectors[k] for k in self._keys]) if self._keys
                        else np.zeros((0, dim), dtype=np.float32))
        self._bm25 = Bm25([t.message_id for t in stored],
                          [turn_index_text(t.speaker, t.text) for t in stored])

    def rank(self, query: str, query_vector: np.ndarray, k: int = 50) -> dict[str, list[str]]:
        """The message ids each baseline ranks first for ``query``: ``bm25``,
        ``full_scan`` (exact cosine) and ``rrf`` (their fusion), ``k`` each."""
        order = np.argsort(-(self._matrix @ query_vector))[:k]
        dense = [self.message_of[self._keys[int(i)]] for i in order]
        lexical = self._bm25.search(query, k)
        return {"bm25": lexical, "full_scan": dense, "rrf": rrf(lexical, dense)[:k]}


def ndcg10(ranked: Sequence[str], gold: Container[str], n_gold: int) -> float:
    """NDCG@10 with binary gains of one ranked list (0.0 when nothing is gold)."""
    dcg = sum(1.0 / math.log2(i + 2) for i, t in enumerate(ranked[:10]) if t in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(n_gold, 10)))
    return dcg / ideal if ideal else 0.0


def mean_rows(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each figure's mean over the questions' rows, to three decimals ({} for none)."""
    if not rows:
        return {}
    return {k: round(statistics.fmean(r[k] for r in rows), 3) for k in rows[0]}
