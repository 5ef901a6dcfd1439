"""pytest fixtures that run strom for a test (docs/TESTING.md):

- `strom_broker`: one standalone broker (no ZooKeeper) on a free port, its data under the
  test's tmp_path; `@pytest.mark.strom_broker(configs={...})` sets server.properties keys.
- `strom_cluster`: a factory, `strom_cluster(3, configs={...}, broker_configs={0: {...}})`,
  for a ZooKeeper server and N brokers (default 3); call it more than once for more clusters.

Both give a `broker.testing.cluster.StromBroker` / `StromCluster`: `bootstrap_servers`, topic
helpers, and kill9 / pause / resume / stop / restart of broker i. Everything they started is
killed when the test ends, pass or fail.

A pytest11 entry point: pytest loads this module in every run where strom is installed, so it
imports nothing heavy itself; the fixtures import what they use.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

import pytest

if TYPE_CHECKING:
    from broker.testing.cluster import StromBroker, StromCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "strom_broker(configs): server.properties keys for the "
                                       "strom_broker fixture")


def pytest_itemcollected(item: pytest.Item) -> None:
    # A test will want brokers: start the helper they are forked from now, so that its import
    # of the broker (~0.5 s of CPU) overlaps the rest of the collection and session start.
    if {"strom_broker", "strom_cluster"} & set(getattr(item, "fixturenames", ())):
        from broker.testing.zygote import shared_zygote
        shared_zygote().warm()


def _where(what: str, workdir: Path, bootstrap: str) -> None:
    # Captured like any setup output: pytest shows it only when the test fails.
    print(f"{what}: bootstrap servers {bootstrap}; logs in {workdir}/*/ (broker.log, zookeeper.log)")


@pytest.fixture
def strom_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator["StromBroker"]:
    """A standalone strom broker, ready to serve; killed after the test."""
    from broker.testing.cluster import StromBroker
    marker = request.node.get_closest_marker("strom_broker")
    configs: Mapping[str, str] | None = None
    if marker is not None:
        configs = marker.kwargs.get("configs", marker.args[0] if marker.args else None)
    workdir = tmp_path / "strom-broker"
    broker = StromBroker.start(workdir, configs)
    _where("strom_broker", workdir, broker.bootstrap_servers)
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def strom_cluster(tmp_path: Path) -> Iterator[Callable[..., "StromCluster"]]:
    """A factory of strom clusters (ZooKeeper + N brokers), each ready to serve when returned;
    all are killed after the test."""
    from broker.testing.cluster import StromCluster
    started: list[StromCluster] = []

    def start(brokers: int = 3, configs: Mapping[str, str] | None = None,
              broker_configs: Mapping[int, Mapping[str, str]] | None = None,
              timeout: float = 30.0) -> StromCluster:
        workdir = tmp_path / f"strom-cluster-{len(started)}"
        cluster = StromCluster.start(workdir, brokers, configs, broker_configs, timeout)
        started.append(cluster)
        _where(f"strom_cluster({brokers})", workdir, cluster.bootstrap_servers)
        return cluster

    try:
        yield start
    finally:
        errors = []
        for cluster in started:
            try:
                cluster.close()
            except Exception as e:   # noqa: BLE001 - close the others, then report
                errors.append(e)
        if errors:
            raise errors[0]
