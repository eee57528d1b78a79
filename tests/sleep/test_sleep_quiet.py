"""Issue 28 §2.6: no library warning reaches a user's terminal from ``tideline sleep``.

``sleep`` printed scikit-learn's ``ConvergenceWarning`` ("Number of distinct clusters
found smaller than n_clusters") on stderr when a scope's memories sit on fewer distinct
points than the clusters asked for. The warnings are now filtered where the library is
called; the real command runs in a real process and its stderr is read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.backend import run
from tests.conftest import hashing

from tideline import Memory


def test_sleep_prints_no_library_warning(tmp_path: Path) -> None:
    store = tmp_path / "s"
    with Memory.open(store, embedder=hashing(), project="global") as mem:
        for word in ("harbour", "lantern", "orchard", "quarry", "meadow", "glacier", "canyon"):
            mem.write(f"{word} notes from the field trip", scope="trip")
        # Seven memories on one point (as when several texts embed alike): k-means asks
        # for five clusters and finds one — where scikit-learn warns.
        run(mem, "UPDATE vectors SET v = (SELECT v FROM vectors AS o WHERE o.space = "
                 "vectors.space ORDER BY o.key LIMIT 1)")
    env = dict(os.environ, TIDELINE_EMBEDDER="hashing", PYTHONWARNINGS="default")
    proc = subprocess.run([sys.executable, "-m", "tideline", "sleep", "--store", str(store),
                           "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and proc.stderr.strip() == "", proc.stderr
