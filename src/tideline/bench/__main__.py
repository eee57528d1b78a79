"""Dispatch ``python -m tideline.bench NAME ...`` to ``tideline.bench.NAME.main``."""

from __future__ import annotations

import importlib
import sys

NAMES = ("recall", "real", "calibrate", "multihop", "sleep", "answerability", "conversation",
         "hooks", "secrets", "locomo", "longmemeval", "pgvector-scale", "writers", "cores",
         "replicas", "gate", "ui")


def main() -> None:
    """Run the named benchmark with the remaining arguments."""
    if len(sys.argv) < 2 or sys.argv[1] not in NAMES:
        sys.stderr.write(f"usage: python -m tideline.bench {{{'|'.join(NAMES)}}} [options]\n")
        raise SystemExit(2)
    module = importlib.import_module(f"tideline.bench.{sys.argv[1].replace('-', '_')}")
    module.main(sys.argv[2:])


main()
