import pytest

from broker.server.connection_quotas import ConnectionQuotas, parse_ip_overrides
from clients.properties import ConfigError


def test_per_ip_limit_with_overrides():
    q = ConnectionQuotas(100, 2, {"10.0.0.9": 3})
    assert q.admit("EXT", "10.0.0.1") is None and q.admit("EXT", "10.0.0.1") is None
    assert "max.connections.per.ip 2" in q.admit("EXT", "10.0.0.1")
    for _ in range(3):
        assert q.admit("EXT", "10.0.0.9") is None
    assert q.admit("EXT", "10.0.0.9") is not None
    q.release("EXT", "10.0.0.1")
    assert q.admit("EXT", "10.0.0.1") is None


def test_broker_wide_limit_leaves_the_inter_broker_listener_out():
    q = ConnectionQuotas(2, 100, inter_broker_listener="INTERNAL")
    assert q.admit("EXT", "a") is None and q.admit("EXT", "b") is None
    assert "max.connections 2" in q.admit("EXT", "c")
    assert q.admit("INTERNAL", "d") is None         # replication is never refused for clients
    q.release("EXT", "a")
    assert q.admit("EXT", "c") is None
    assert q.total == 2


def test_overrides_parse_as_kafka_writes_them():
    assert parse_ip_overrides("127.0.0.1:200, localhost:5") == {"127.0.0.1": 5}
    assert parse_ip_overrides("") == {}
    for bad in ("127.0.0.1", "127.0.0.1:x", ":5", "no-such-host.invalid:3"):
        with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
            parse_ip_overrides(bad)
