"""One process of the failover load (tests/postgres/test_pg_failover.py): a writer, a
recaller or a sleeper, on the store that ``TIDELINE_DATABASE_URL`` and
``TIDELINE_DATABASE_READ_URL`` name, until a stop file appears.

``python -m tests.postgres.failover_load ROLE NAME OUT STOP``. Every outcome is one line
of ``OUT`` (flushed at once), so the test counts what was attempted, acknowledged and
refused even after a ``kill -9`` of the server:

* ``A key``: a write attempted; ``K key id``: acknowledged (the call returned);
* ``OK t read_only``: a recall answered; ``S t errors``: a sleep finished (with
  that many failed steps);
* ``R code t``: a retryable typed error (the same call is made again);
* ``E code message``: any other typed error. An untyped one is a traceback on stderr,
  which the test forbids.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

from tideline import Memory
from tideline.embed import HashingEmbedder, ThresholdProfile
from tideline.errors import TidelineError


def _open(home: Path) -> Memory:
    emb = HashingEmbedder()
    emb.profile = ThresholdProfile(same=0.9, related=0.55, abstain=0.35, floor=0.1)
    while True:  # a process started during the switch opens once a server answers
        try:
            return Memory.open(home, embedder=emb, project="global")
        except TidelineError as exc:
            if not exc.retryable:
                raise
            print(f"open: {exc.code}: {exc} <- {exc.__cause__!r}", file=sys.stderr)  # noqa: T201
            time.sleep(0.05)


def main(role: str, name: str, out_path: str, stop: str) -> int:
    if os.environ.get("TIDELINE_TEST_DUMP"):  # where a process that hangs is, every 10 s
        import faulthandler

        faulthandler.dump_traceback_later(10, repeat=True)
    rng = random.Random(name)  # noqa: S311 - test data
    home = Path(out_path).with_suffix(".home")
    out = open(out_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives to the end
    mem = _open(home)
    i = 0
    try:
        while not os.path.exists(stop):
            if role == "writer":
                key = f"{name}-{i}"
                i += 1
                words = " ".join(f"{rng.getrandbits(40):x}" for _ in range(6))
                out.write(f"A {key}\n")
                while not os.path.exists(stop):
                    try:
                        res = mem.remember(f"{key} {words}", idempotency_key=key)
                    except TidelineError as exc:
                        if not exc.retryable:
                            out.write(f"E {exc.code} {' '.join(str(exc).split())[:200]}\n")
                            break
                        out.write(f"R {exc.code} {time.time():.3f}\n")
                        time.sleep(0.02)
                        continue
                    out.write(f"K {key} {res.id}\n")
                    break
            else:
                try:
                    if role == "recaller":
                        packet = mem.recall(f"{rng.getrandbits(40):x} writer fact", limit=5)
                        out.write(f"OK {time.time():.3f} {int(packet.read_only)}\n")
                    else:
                        done = mem.sleep(force=True, wait_s=1.0)
                        out.write(f"S {time.time():.3f} {len(done.get('errors') or [])}\n")
                except TidelineError as exc:
                    kind = "R" if exc.retryable else "E"
                    out.write(f"{kind} {exc.code} {time.time():.3f}\n")
                time.sleep(0.01 if role == "recaller" else 0.5)
    finally:
        mem.close()
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
