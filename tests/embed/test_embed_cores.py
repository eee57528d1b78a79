"""The threads of an embedding call: every core when the machine is quiet, fewer when other
processes hold them (tideline.embed.cores), and the e5 engine honouring each grant."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tideline.embed.cores import (
    CoreShare,
    Sample,
    free_cores,
    openmp_thread_setter,
    read_sample,
)


def _sample(wall: float, busy: float, total: float, own: float) -> Sample:
    return Sample(wall=wall, busy_s=busy, total_s=total, own_s=own)


@given(cores=st.integers(1, 64), window=st.floats(0.05, 100.0),
       others=st.floats(0.0, 1.0), own=st.floats(0.0, 1.0))
def test_free_cores_is_what_the_others_left(cores: int, window: float, others: float,
                                            own: float) -> None:
    """Over a window of ``window`` seconds the others use ``others`` of the machine and this
    process ``own`` of what is left; the cores left free are the others' complement."""
    capacity = cores * window
    busy_others = others * capacity
    busy_own = own * (capacity - busy_others)
    before = _sample(0.0, 10.0, 100.0, 3.0)
    after = _sample(window, 10.0 + busy_others + busy_own, 100.0 + capacity, 3.0 + busy_own)
    free = free_cores(before, after, cores)
    assert free is not None
    assert free == pytest.approx(cores * (1.0 - others), abs=1e-6 * cores + 1e-9)
    assert 0.0 <= free <= cores


def test_a_window_too_short_tells_nothing() -> None:
    before = _sample(0.0, 10.0, 100.0, 1.0)
    assert free_cores(before, _sample(0.001, 10.0, 100.01, 1.0), 2) is None
    assert free_cores(before, before, 2) is None
    # counters that went back (a container's /proc restarted) are no window either
    assert free_cores(before, _sample(1.0, 5.0, 50.0, 1.0), 2) is None


@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 5.0)), min_size=1,
                max_size=30), st.integers(1, 8), st.floats(0.0, 20.0))
def test_grants_stay_between_one_and_all_cores(steps: list[tuple[float, float]], cores: int,
                                               load: float) -> None:
    """Whatever the machine does, a grant is a whole number of threads in [1, cores]."""
    wall = busy = total = 0.0
    scripted = [_sample(0.0, 0.0, 0.0, 0.0)]
    for used, window in steps:
        wall += window
        total += cores * window
        busy += used * cores * window
        scripted.append(_sample(wall, busy, total, 0.0))
    feed = iter(scripted)
    share = CoreShare(cores, read=lambda: next(feed), load=lambda: load)
    for _ in scripted:
        assert 1 <= share.threads() <= cores


def test_a_quiet_machine_gets_every_core_and_a_busy_one_fewer() -> None:
    samples = [
        _sample(0.0, 0.0, 0.0, 0.0),
        # 1 s on 2 cores: the others used 0.05 core -> both cores
        _sample(1.0, 0.05 + 1.9, 2.0, 1.9),
        # a back-to-back call 1 ms later: too short to tell, the grant stays
        _sample(1.001, 1.95, 2.0001, 1.9),
        # the next second another process held a whole core -> one thread
        _sample(2.0, 1.95 + 1.0 + 0.9, 4.0, 2.8),
        # half a core taken: a thread for a core half free costs more than it gives -> one
        _sample(3.0, 3.85 + 0.5 + 1.0, 6.0, 3.8),
        # quiet again
        _sample(4.0, 5.35 + 0.0 + 1.5, 8.0, 5.3),
    ]
    feed = iter(samples)
    share = CoreShare(2, read=lambda: next(feed), load=lambda: 0.1)
    assert [share.threads() for _ in samples] == [2, 2, 2, 1, 1, 2]


def test_the_first_look_reads_the_load_average() -> None:
    now = _sample(0.0, 0.0, 0.0, 0.0)
    assert CoreShare(2, read=lambda: now, load=lambda: 1.2).threads() == 1
    assert CoreShare(2, read=lambda: now, load=lambda: 0.3).threads() == 1  # 0.7 free
    assert CoreShare(2, read=lambda: now, load=lambda: 0.2).threads() == 2
    assert CoreShare(4, read=lambda: now, load=lambda: 2.0).threads() == 2

    def no_load() -> float:
        raise OSError("no load average here")

    assert CoreShare(4, read=lambda: now, load=no_load).threads() == 4


def test_without_proc_every_core_is_granted() -> None:
    assert CoreShare(2, read=lambda: None, load=lambda: 9.0).threads() == 2


def test_read_sample_parses_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n")
    sample = read_sample(stat)
    assert sample is not None
    hz = os.sysconf("SC_CLK_TCK")
    assert sample.total_s == pytest.approx(980 / hz)
    assert sample.busy_s == pytest.approx((980 - 820) / hz)
    assert read_sample(tmp_path / "missing") is None


@given(st.binary(max_size=200))
def test_read_sample_never_raises_on_odd_files(blob: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        stat = Path(tmp) / "stat"
        stat.write_bytes(blob)
        sample = read_sample(stat)
    assert sample is None or 0 <= sample.busy_s <= sample.total_s


def test_real_proc_stat_when_there_is_one() -> None:
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc here")
    sample = read_sample()
    assert sample is not None and 0 <= sample.busy_s <= sample.total_s


def test_no_openmp_in_the_maps_means_no_setter(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libc.so.6\n"
                    "7f02-7f03 r-xp 00000000 08:01 2 /nowhere/libgomp-x.so.1\n")
    assert openmp_thread_setter(maps) is None  # listed but not loadable: skipped
    assert openmp_thread_setter(tmp_path / "missing") is None


_PROBE = """
import ctypes, json, sys
import numpy as np
from pathlib import Path
from tideline.embed.e5 import E5Embedder, _THREADS
text = "Melanie went camping with the kids and saw the Perseid meteor shower."
out = {}
vecs = []
for n in (1, 2, None):
    e = E5Embedder(num_threads=n)
    vecs.append(e.embed_passages([text, text + " Again."]))
    vecs.append(e.embed_query(text)[None, :])
    lib = next(line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
               if "libgomp" in line.split()[-1])
    out[str(n)] = ctypes.CDLL(lib).omp_get_max_threads()
out["setter"] = _THREADS._setter is not None
out["user"] = _THREADS.user
out["same"] = bool(np.allclose(vecs[0], vecs[2], atol=1e-6)
                   and np.allclose(vecs[1], vecs[3], atol=1e-6)
                   and np.allclose(vecs[0], vecs[4], atol=1e-6))
print(json.dumps(out))
"""


def _probe(**env: str) -> dict[str, object]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("OMP_NUM_THREADS", "TIDELINE_EMBED_THREADS")}
    proc = subprocess.run([sys.executable, "-c", _PROBE], env={**base, **env},
                          capture_output=True, text=True, check=True, timeout=300)
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the setter reads /proc")
def test_each_engine_call_runs_on_its_grant() -> None:
    """One engine per process; each call sets its threads: the embedder's count, else the
    grant. The vectors do not depend on the threads."""
    out = _probe()
    assert out["setter"] is True
    assert out["user"] is None
    assert out["1"] == 1 and out["2"] == 2
    assert 1 <= int(str(out["None"])) <= max(2, len(os.sched_getaffinity(0)))
    assert out["same"] is True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the setter reads /proc")
def test_the_users_omp_num_threads_fixes_the_unnamed_count() -> None:
    out = _probe(OMP_NUM_THREADS="1")
    assert out["user"] == 1
    assert out["None"] == 1 and out["2"] == 2
