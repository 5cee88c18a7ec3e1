"""Fixtures of the Dask tests (test_dask.py, test_reduce_dask.py)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    """Two worker processes of one thread each: every block runs in a rebuilt copy of the function."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client:
            yield client


@pytest.fixture(params=["threads", "distributed"])
def compute(request):
    """Computes Dask arrays together, on the local threaded scheduler or on the cluster."""
    if request.param == "threads":
        dask = pytest.importorskip("dask")
        return lambda *arrays: dask.compute(*arrays, scheduler="threads")
    client = request.getfixturevalue("client")
    return lambda *arrays: tuple(client.gather(client.compute(list(arrays))))
