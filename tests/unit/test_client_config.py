"""clients.config: Kafka's key names, Python keywords, defaults, types and clear errors."""
import pytest

from clients.config import ConfigError, acks_value, bootstrap_addresses, resolve


def test_defaults_are_kafkas_and_every_key_is_present():
    cfg = resolve("producer", {"bootstrap.servers": "h:9092"})
    assert cfg["acks"] == "all"
    assert cfg["enable.idempotence"] is True
    assert cfg["batch.size"] == 16384
    assert cfg["linger.ms"] == 5.0
    assert cfg["max.in.flight.requests.per.connection"] == 5
    assert cfg["bootstrap.servers"] == ["h:9092"]
    consumer = resolve("consumer", {"bootstrap.servers": "h:9092"})
    assert consumer["auto.offset.reset"] == "latest"
    assert consumer["enable.auto.commit"] is True
    assert consumer["isolation.level"] == "read_uncommitted"


def test_python_keywords_name_dotted_keys_and_win_over_the_dict():
    cfg = resolve("producer", {"bootstrap.servers": "h:1", "linger.ms": 50}, linger_ms=7,
                  max_in_flight_requests_per_connection=1)
    assert cfg["linger.ms"] == 7.0
    assert cfg["max.in.flight.requests.per.connection"] == 1
    assert cfg.ms("request.timeout.ms") == 30.0


def test_strings_from_properties_files_are_converted():
    cfg = resolve("consumer", {"bootstrap.servers": "a:1, b:2", "enable.auto.commit": "false",
                               "fetch.min.bytes": "1024", "auto.offset.reset": "smallest"})
    assert cfg["bootstrap.servers"] == ["a:1", "b:2"]
    assert cfg["enable.auto.commit"] is False
    assert cfg["fetch.min.bytes"] == 1024
    assert cfg["auto.offset.reset"] == "earliest"


def test_acks_minus_one_is_all():
    cfg = resolve("producer", bootstrap_servers="h:1", acks=-1)
    assert cfg["acks"] == "all" and acks_value(cfg["acks"]) == -1
    assert acks_value("1") == 1 and acks_value("0") == 0


@pytest.mark.parametrize("kwargs, key", [
    ({"lingr_ms": 5}, "lingr.ms"),
    ({"batch_size": "big"}, "batch.size"),
    ({"acks": "2"}, "acks"),
    ({"compression_type": "brotli"}, "compression.type"),
    ({"enable_idempotence": "yes"}, "enable.idempotence"),
])
def test_bad_keys_and_values_name_the_key(kwargs, key):
    with pytest.raises(ConfigError) as e:
        resolve("producer", {"bootstrap.servers": "h:1"}, source="producer.properties", **kwargs)
    assert e.value.key == key
    assert key in str(e.value) and "producer.properties" in str(e.value)


def test_a_consumer_key_is_unknown_to_a_producer():
    with pytest.raises(ConfigError, match="group.id: unknown producer"):
        resolve("producer", bootstrap_servers="h:1", group_id="g")


def test_bootstrap_is_required_and_must_be_host_port():
    with pytest.raises(ConfigError, match="bootstrap.servers: required"):
        resolve("admin")
    with pytest.raises(ConfigError, match="not host:port"):
        resolve("admin", bootstrap_servers="localhost")
    assert bootstrap_addresses("PLAINTEXT://h:9092,[::1]:9093") == [("h", 9092), ("::1", 9093)]


def test_shared_files_with_ignored_keys_still_load():
    cfg = resolve("admin", {"bootstrap.servers": "h:1", "client.dns.lookup": "use_all_dns_ips"})
    assert "client.dns.lookup" not in cfg
