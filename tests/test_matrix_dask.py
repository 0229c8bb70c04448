"""The Monte Carlo matrix accountant on dask.distributed (issue 16): with a LocalCluster of 2 worker processes on
loopback its seeded chunks (SeedSequence.spawn) give exactly the serial privacy-loss samples, and so the same
epsilon and delta with the same Monte Carlo error bars."""

from __future__ import annotations

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from dputils.book.sweep import local_cluster  # noqa: E402
from dputils.matrix import BallsInBinsMatrixMechanism, MatrixMonteCarloAccountant, build_strategy  # noqa: E402

pytestmark = pytest.mark.timeout(600)


def test_matrix_monte_carlo_on_two_dask_workers_equals_serial():
    mech = BallsInBinsMatrixMechanism(build_strategy("bsr", 2, 4, 2), 0.9)
    opts = dict(samples=5_000, seed=3, chunk=1_200)  # 5 chunks, the last of 200
    serial = MatrixMonteCarloAccountant(**opts).compose(mech)
    with local_cluster(2) as cluster, distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        dask = MatrixMonteCarloAccountant(**opts, client=client).compose(mech)
        losses = dask.losses()
        eps, delta = dask.get_epsilon(0.05), dask.get_delta(1.0)
    for d in ("remove", "add"):
        assert losses[d].shape == (5_000,)
        np.testing.assert_array_equal(losses[d], serial.losses()[d])
    for a, b in ((eps, serial.get_epsilon(0.05)), (delta, serial.get_delta(1.0))):
        assert (a.value, a.lower, a.upper) == (b.value, b.lower, b.upper)
