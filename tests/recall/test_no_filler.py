"""Issue 28 §2.11: recall lists no filler items at (next to) zero confidence.

After a sleep, the cluster router adds the neighbours of the query's cluster; those
the query does not reach scored ~0 and were listed as ``[0.00]``/``[0.01]`` items, filling
the limit with noise. Items under 1 % confidence are no longer listed.
"""

from __future__ import annotations

from tideline import Memory
from tideline.recall.scoring import SHOWN_CONFIDENCE

WORDS = "harbour lantern orchard quarry meadow glacier canyon river forest desert island valley"


def test_recall_lists_no_zero_confidence_filler(mem: Memory) -> None:
    for i, word in enumerate(WORDS.split()):
        mem.write(f"the {word} survey found {i} new species near the {word} camp",
                  scope="atlas", importance=1, event_time="2010-01-01")
    mem.sleep()
    seen = 0
    for query in ("river forest", "glacier", "desert island", "lantern quarry", "meadow"):
        packet = mem.recall(query, scope="atlas", limit=20)
        assert packet.items, query
        seen += len(packet.items)
        low = [(i.id, i.confidence) for i in packet.items if i.confidence < SHOWN_CONFIDENCE]
        assert not low, (query, low)
    assert seen >= 10  # the router's real neighbours are still listed
