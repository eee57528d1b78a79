"""Issue 28 §2.11: ``--help`` shows no ``<bool>`` after a flag (a flag takes no value)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_flags_show_no_type_in_help() -> None:
    env = dict(os.environ, COLUMNS="160", TERM="dumb")
    for command in (["recall"], ["sleep"], ["dream"], ["export"]):
        proc = subprocess.run([sys.executable, "-m", "tideline", *command, "--help"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "--json" in proc.stdout and "<bool>" not in proc.stdout, proc.stdout
    recall = subprocess.run([sys.executable, "-m", "tideline", "recall", "--help"],
                            capture_output=True, text=True, env=env, timeout=120).stdout
    assert "<int>" in recall  # an option that takes a value still says which
