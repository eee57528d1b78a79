"""Derive an embedder's threshold profile from the real benchmark.

``python -m tideline.bench calibrate --embedder e5 [--write]``

* **same** (potentiate): from the ``duplicates`` pairs, the cosine that best
  separates rephrasings from related and unrelated statements, counting a merge
  of two different facts twice as bad as a rephrasing kept apart (a merge loses
  a fact; a duplicate only costs space and is linked).
* **related** (link): the cosine that best separates related from unrelated
  pairs (balanced accuracy) while linking at most 10 % of unrelated pairs —
  an edge to an unrelated memory would mislead graph spread.
* **floor**: just under the 2nd percentile of (query, answer) cosines, so that
  vector candidates below it are noise.
* **abstain** and **margin**: the pipeline runs every query with abstention off
  and records its signals (best cosine, best-hit margin over the background in
  standard deviations, keyword coverage); a grid search picks the pair that
  abstains on the most noise queries while abstaining on at most 5 % of the
  answerable ones.

With ``--write`` the result goes to ``src/tideline/embed/calibrated.json``,
which :mod:`tideline.embed.profiles` loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tideline.bench.real import load
from tideline.embed import Embedder, ThresholdProfile, make_embedder
from tideline.memory import Memory

__all__ = ["calibrate", "main"]

MAX_FALSE_ABSTENTION = 0.05


def _pair_cosines(embedder: Embedder) -> dict[str, np.ndarray]:
    data = load()
    text = {f["id"]: f["text"] for f in data.facts}
    out: dict[str, list[float]] = {"same": [], "related": [], "unrelated": []}
    a = embedder.embed_passages([text[d["a"]] for d in data.duplicates])
    b = embedder.embed_passages([d["b_text"] for d in data.duplicates])
    for d, va, vb in zip(data.duplicates, a, b, strict=True):
        out[d["relation"]].append(float(va @ vb))
    return {k: np.asarray(v) for k, v in out.items()}


def _best_same(c: dict[str, np.ndarray]) -> float:
    grid = np.arange(0.5, 1.0, 0.0025)
    cost = [((c["same"] < t).sum() + 2 * (c["related"] >= t).sum()
             + 2 * (c["unrelated"] >= t).sum()) for t in grid]
    return float(grid[int(np.argmin(cost))])


def _best_related(c: dict[str, np.ndarray], same: float) -> float:
    """Best balanced accuracy among thresholds that link at most 10 % of unrelated pairs."""
    grid = [t for t in np.arange(0.0, same, 0.0025) if (c["unrelated"] >= t).mean() <= 0.10]
    scores = [((c["related"] >= t).mean() + (c["unrelated"] < t).mean()) / 2 for t in grid]
    return float(grid[int(np.argmax(scores))]) if grid else same


def _signals(embedder: Embedder, floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per query: is-noise, best cosine, margin; keyword-trusted queries are left out."""
    data = load()
    probe = dataclasses.replace(embedder.profile, floor=floor, abstain=floor, margin=99.0)
    original = embedder.profile
    rows: list[tuple[bool, float, float]] = []
    try:
        embedder.profile = probe  # type: ignore[misc]
        with tempfile.TemporaryDirectory() as tmp, \
                Memory.open(Path(tmp), embedder=embedder, project="global") as mem:
            for f in data.facts:
                mem.remember(f["text"], scope=f["scope"], idempotency_key=f["id"])
            for q in data.queries:
                packet = mem.recall(q["text"], scope=q["scope"], limit=10,
                                    include_turns=False, abstain=False, log=False)
                if packet.signals.get("best_keyword", 0.0) >= mem.config.recall.keyword_trust:
                    if q["type"] == "noise":
                        rows.append((True, 1.0, 99.0))  # keyword trust: cannot abstain
                    continue
                rows.append((q["type"] == "noise", packet.best_similarity,
                             packet.signals.get("margin_z", 0.0)))
    finally:
        embedder.profile = original  # type: ignore[misc]
    arr = np.asarray(rows, dtype=np.float64)
    return arr[:, 0] == 1, arr[:, 1], arr[:, 2]


def calibrate(embedder: Embedder) -> dict[str, Any]:
    """Compute the profile and the measurements behind it."""
    data = load()
    pairs = _pair_cosines(embedder)
    same = _best_same(pairs)
    related = _best_related(pairs, same)
    vecs = embedder.embed_passages([f["text"] for f in data.facts])
    index = {f["id"]: i for i, f in enumerate(data.facts)}
    answer_cos = [float(vecs[index[e]] @ embedder.embed_query(q["text"]))
                  for q in data.queries if q["type"] != "noise" for e in q["expected"]]
    floor = round(float(np.percentile(answer_cos, 2)) - 0.01, 4)
    noise, best, margin = _signals(embedder, floor)
    real = ~noise
    answerable = sum(1 for q in data.queries if q["type"] != "noise")
    choice = (0.0, 1.0, floor, 99.0)
    for tb in np.arange(max(floor, 0.0), 1.0, 0.0025):
        for tz in np.arange(0.0, 8.0, 0.1):
            trusted = (best >= tb) | (margin >= tz)
            false_abst = float((~trusted[real]).sum()) / max(1, answerable)
            noise_abst = float((~trusted[noise]).mean()) if noise.any() else 0.0
            if false_abst <= MAX_FALSE_ABSTENTION and (noise_abst, -false_abst) > choice[:2]:
                choice = (noise_abst, -false_abst, float(tb), float(tz))
    profile = ThresholdProfile(same=round(same, 4), related=round(related, 4),
                               abstain=round(max(choice[2], floor), 4), floor=floor,
                               margin=round(choice[3], 2))

    def dist(x: np.ndarray | list[float]) -> dict[str, float]:
        a = np.asarray(x)
        return {p: round(float(np.percentile(a, q)), 4)
                for p, q in (("p10", 10), ("median", 50), ("p90", 90))}

    return {
        "profile": dataclasses.asdict(profile),
        "measured": {
            "pairs": {k: dist(v) | {"n": len(v)} for k, v in pairs.items()},
            "answer_cosine": dist(answer_cos),
            "noise_abstention": round(choice[0], 4),
            "false_abstention": round(-choice[1], 4),
        },
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m tideline.bench calibrate")
    parser.add_argument("--embedder", default="e5")
    parser.add_argument("--write", action="store_true", help="update embed/calibrated.json")
    args = parser.parse_args(argv)
    embedder = make_embedder(args.embedder)
    result = calibrate(embedder)
    print(json.dumps(result, indent=1))
    if args.write:
        path = Path(__file__).resolve().parent.parent / "embed" / "calibrated.json"
        current = json.loads(path.read_text("utf-8")) if path.is_file() else {"profiles": {}}
        current["profiles"][embedder.name] = result | {"marker": embedder.marker}
        path.write_text(json.dumps(current, indent=1, ensure_ascii=False) + "\n", "utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
