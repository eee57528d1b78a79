"""Multi-hop benchmark: recall@k before and after sleeps with co-recall training.

``python -m tideline.bench.multihop [--chains 200] [--distractors 2000] [--embedder hashing]``

Each chain is three facts that only touch their neighbours::

    A  "Project Vesk stores its telemetry in the Kolar cluster."
    B  "The Kolar cluster is administered by Ines Okafor."
    C  "Ines Okafor is on parental leave until March."

The multi-hop question names only A's words ("Project Vesk telemetry"); B is one
hop away, C two — neither shares a word with the question, so lexical and
vector search cannot find them. Training is ordinary use: for half of the
chains (the *trained* half) an agent looks up the cluster and then the person,
recalling A+B and B+C together, and reflects positively on what helped. Sleep
commits that eligibility into ``co_recall`` edges; recall's graph spread then
walks A → B → C. The other half (*control*) is never trained, so any lift
there would be leakage. Distractors are the scaling benchmark's synthetic facts.

Time is compressed: an agent's tasks are minutes to hours apart, the benchmark's
a few milliseconds, so the cross-recall window is scaled down with it (600 s →
40 ms, τ 300 s → 20 ms) and tasks are 60 ms apart — the two lookups of one
task pair across recalls, consecutive tasks do not.

Prints one JSON line: recall@5/@10 of B (hop 1) and C (hop 2) for trained and
control chains before and after, direct-lookup accuracy (does training hurt the
plain question?), sleep time and edge counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tideline.bench.synth import generate
from tideline.config import Config
from tideline.embed import make_embedder
from tideline.memory import Memory
from tideline.models import MemoryRecord

__all__ = ["Chain", "main", "make_chains", "run"]

_WINDOW = 0.04
_TASK_GAP = 0.06
_SYL = ("ka lo mi ve tor an sel ru bex dal fen gri hol jun kre lum nor pav qui ros "
        "sat tib ulm vor wen yas zed").split()
_DATA = ("telemetry", "invoices", "audit logs", "user uploads", "build artifacts",
         "payment events", "search index", "ml features")
_STATUS = ("is on parental leave until March", "is the only one with the root password",
           "moved to the Lisbon office last week", "is on call every second weekend",
           "prefers to be contacted by email only", "is leaving the company in June")
_FIRST = ("Ines Mateo Aiko Priya Omar Sofia Yusuf Hana Lars Noor Elif Tomas Zara Ravi Kofi "
          "Pavel Amara Leila Bruno Anya Selin Hugo Nadia Emil Rosa Ivan Olga Sami").split()
_LAST = ("Okafor Lindqvist Tanaka Novak Haddad Schulz Moreau Petrov Costa Weber Kowalski "
         "Rossi Ibrahim Fischer Nakamura Jensen Dubois Popescu Silva Kaur").split()


@dataclass(frozen=True)
class Chain:
    """Three linked facts and the words to ask about them."""

    project: str
    data: str
    cluster: str
    person: str
    status: str

    def facts(self) -> tuple[str, str, str]:
        """A, B, C."""
        return (f"Project {self.project} stores its {self.data} in the {self.cluster} cluster.",
                f"The {self.cluster} cluster is administered by {self.person}.",
                f"{self.person} {self.status}.")


def _name(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_SYL) for _ in range(n)).capitalize()


def make_chains(n: int, seed: int = 11) -> list[Chain]:
    """``n`` chains with unique project, cluster and person names."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[Chain] = []
    while len(out) < n:
        project, cluster = _name(rng, 2), _name(rng, 3)
        person = f"{rng.choice(_FIRST)} {_name(rng, 2)}{rng.choice(_LAST)[:3].lower()}"
        if {project, cluster, person} & seen:
            continue
        seen.update((project, cluster, person))
        out.append(Chain(project, rng.choice(_DATA), cluster, person, rng.choice(_STATUS)))
    return out


def _load(mem: Memory, texts: list[str]) -> list[int]:
    """Insert without the novelty gate: the chains are template siblings that a lexical
    embedder's gate would rightly merge (the write path is not what is measured here)."""
    now = time.time()
    ids: list[int] = []
    for lo in range(0, len(texts), 1_000):
        chunk = texts[lo:lo + 1_000]
        vectors = mem.embedder.embed_passages(chunk)
        with mem.store.transaction() as c:
            for text, vec in zip(chunk, vectors, strict=True):
                rec = MemoryRecord(id=0, scope="global", kind="fact", gesture=text,
                                   weight=0.25, stability=7.0, last_access=now,
                                   recorded_at=now, updated_at=now)
                ids.append(mem.store.insert_memory(c, rec, vec))
    return ids


def _hits(mem: Memory, query: str, k: int) -> list[int]:
    return [int(i.id) for i in mem.recall(query, limit=k, include_turns=False, log=False,
                                          abstain=False).memories]


def _measure(mem: Memory, chains: list[Chain], ids: list[tuple[int, int, int]],
             ks: tuple[int, ...] = (5, 10, 20)) -> dict[str, float]:
    out: dict[str, float] = {}
    kmax = max(ks)
    found = [(_hits(mem, f"Project {c.project} {c.data}", kmax), t) for c, t in
             zip(chains, ids, strict=True)]
    for k in ks:
        out[f"hop1@{k}"] = round(sum(b in h[:k] for h, (_, b, _) in found) / len(found), 4)
        out[f"hop2@{k}"] = round(sum(c in h[:k] for h, (_, _, c) in found) / len(found), 4)
        out[f"both@{k}"] = round(sum(b in h[:k] and c in h[:k] for h, (_, b, c) in found)
                                 / len(found), 4)
    out["direct@1"] = round(sum(
        _hits(mem, f"who administers the {c.cluster} cluster", 1)[:1] == [b]
        for c, (_, b, _) in zip(chains, ids, strict=True)) / len(chains), 4)
    return out


def run(chains: int = 200, distractors: int = 2000, embedder: str = "hashing",
        sessions: int = 2, seed: int = 11, home: Path | None = None,
        graph_decay: float | None = None) -> dict[str, Any]:
    """Build the store, measure, train, sleep, measure again.

    ``graph_decay`` overrides :attr:`RecallTuning.graph_decay` (how much of a seed's
    score a neighbour one hop away inherits) to show its effect on the lift.
    """
    rng = random.Random(seed)
    all_chains = make_chains(chains, seed)
    facts, _ = generate(distractors, 0, seed=seed)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config.load(home=home or Path(tmp), embedder=embedder)
        cfg = dataclasses.replace(cfg, sleep=dataclasses.replace(
            cfg.sleep, stdp_window_s=_WINDOW, stdp_time_tau_s=_WINDOW / 2))
        if graph_decay is not None:
            cfg = dataclasses.replace(cfg, recall=dataclasses.replace(cfg.recall,
                                                                      graph_decay=graph_decay))
        emb = make_embedder(embedder)
        with Memory.open(config=cfg, embedder=emb, project="global") as mem:
            t0 = time.perf_counter()
            flat = _load(mem, [f for c in all_chains for f in c.facts()] +
                         [f.text for f in facts])
            ids = [(flat[3 * i], flat[3 * i + 1], flat[3 * i + 2])
                   for i in range(len(all_chains))]
            load_s = time.perf_counter() - t0
            half = len(all_chains) // 2
            trained, control = all_chains[:half], all_chains[half:]
            tid, cid = ids[:half], ids[half:]
            before = {"trained": _measure(mem, trained, tid), "control": _measure(mem, control,
                                                                                   cid)}
            mem.sleep(force=True)  # baseline clusters etc.: the lift below is the edges
            t1 = time.perf_counter()
            for _ in range(sessions):
                order = list(range(half))
                rng.shuffle(order)
                for i in order:
                    c = trained[i]
                    p1 = mem.recall(f"{c.cluster} cluster", limit=5, include_turns=False)
                    p2 = mem.recall(c.person, limit=5, include_turns=False)
                    useful = [x for x in (*tid[i],) if x in {int(m.id) for m in
                                                             (*p1.memories, *p2.memories)}]
                    if useful:
                        mem.reflect(useful, 0.5)
                    time.sleep(_TASK_GAP)
            train_s = time.perf_counter() - t1
            t2 = time.perf_counter()
            slept = mem.sleep()
            sleep_s = time.perf_counter() - t2
            after = {"trained": _measure(mem, trained, tid), "control": _measure(mem, control,
                                                                                  cid)}
            edges = mem.introspect()["edges"]
    return {
        "bench": "multihop", "embedder": embedder, "chains": chains, "distractors": distractors,
        "graph_decay": graph_decay if graph_decay is not None else Config().recall.graph_decay,
        "memories": chains * 3 + distractors, "training_sessions": sessions,
        "before": before, "after": after,
        "lift": {k: round(after["trained"][k] - before["trained"][k], 4)
                 for k in before["trained"]},
        "edges": edges, "co_recall_written": slept["steps"]["plasticity"]["written"],
        "load_s": round(load_s, 2), "train_s": round(train_s, 2), "sleep_s": round(sleep_s, 2),
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="python -m tideline.bench.multihop")
    ap.add_argument("--chains", type=int, default=200)
    ap.add_argument("--distractors", type=int, default=2000)
    ap.add_argument("--embedder", default="hashing")
    ap.add_argument("--sessions", type=int, default=2, help="training passes over the chains")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--graph-decay", type=float, default=None,
                    help="override RecallTuning.graph_decay for this run")
    args = ap.parse_args(argv)
    print(json.dumps(run(args.chains, args.distractors, args.embedder, args.sessions,
                         args.seed, graph_decay=args.graph_decay), ensure_ascii=False))


if __name__ == "__main__":
    main()
