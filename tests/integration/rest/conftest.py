"""One broker and one REST proxy (real processes) per test module: the REST tests walk
endpoints against a live proxy, as a user's curl script would."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.rest_proxy import RestProxyProcess


@dataclass
class RestEnv:
    broker: BrokerProcess
    proxy: RestProxyProcess

    @property
    def url(self) -> str:
        return self.proxy.url

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap


@pytest.fixture(scope="module")
def rest_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestEnv]:
    """A broker (3 partitions a topic by default) and a proxy with a 3 s idle timeout for
    consumer instances (the expiry tests wait that long, not five minutes)."""
    base = tmp_path_factory.mktemp("rest")
    broker = BrokerProcess(base / "broker", overrides={"num.partitions": "3"}).start()
    proxy = RestProxyProcess(base / "proxy", broker.bootstrap,
                             {"consumer.instance.timeout.ms": "3000"})
    try:
        proxy.start()
    except Exception:
        broker.stop()
        raise
    yield RestEnv(broker, proxy)
    proxy.stop()
    broker.stop()
