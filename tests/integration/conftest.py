import pytest

from tests.support.broker_process import BrokerProcess


@pytest.fixture
def broker_factory(tmp_path):
    """Start standalone brokers as real processes; all are stopped at the end of the test."""
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, name: str = "b0", start: bool = True) -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, overrides=overrides)
        started.append(b)
        return b.start() if start else b

    yield make
    for b in started:
        b.stop()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()
