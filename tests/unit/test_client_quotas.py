"""Client quotas without sockets: the sampled rate and its first-window rule, the eight levels
of quota configs, sensors shared by metric tags, throttle times, and the listener's mute."""
from __future__ import annotations

import asyncio

import pytest

from broker.quota.entities import (CLIENT_ID, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, USER,
                                   check_entity, check_value, entity, quota_of_tags, resolve)
from broker.quota.manager import ClientQuotaManagers, QuotaSettings
from broker.quota.rate import SampledRate
from broker.quota.service import ClientQuotas

MB = 1_000_000


def test_a_fresh_rate_is_measured_over_at_least_samples_minus_one_windows():
    r = SampledRate(11, 1000, now_ms=0)
    r.record(5 * MB, 0)
    # Kafka's first-window rule: 5 MB at once is 0.5 MB/s over the 10 s assumed, not infinite.
    assert r.window_size_ms(0) == 10_000
    assert r.measure(0) == pytest.approx(0.5 * MB)
    r.record(5 * MB, 3_500)
    assert r.window_size_ms(3_500) == pytest.approx(10_500)   # 3 full windows + 7 padded


def test_samples_older_than_the_windows_are_forgotten():
    r = SampledRate(11, 1000, now_ms=0)
    r.record(10 * MB, 0)
    for t in range(1000, 10_001, 1000):
        r.record(0, t)
    assert r.total(10_999) == 10 * MB
    assert r.total(11_000) == 0          # the first sample is 11 windows old


def test_throttle_time_is_the_excess_over_the_quota_times_the_window():
    m = ClientQuotaManagers(QuotaSettings(11, 1))
    m.configure({entity(user="alice"): {PRODUCER_BYTE_RATE: 1.0 * MB}})
    assert m.produce.record("alice", "app", 10 * MB, 0) == 0          # 1 MB/s over 10 s: at quota
    # 12 MB over 10 s = 1.2 MB/s: (1.2 - 1) / 1 x 10 s = 2 s.
    assert m.produce.record("alice", "app", 2 * MB, 0) == 2000
    assert m.produce.record("bob", "app", 50 * MB, 0) == 0            # no quota for bob
    assert not m.fetch.enabled and m.fetch.record("alice", "app", 50 * MB, 0) == 0


def test_a_client_limited_to_1_mb_per_second_writes_about_that_much():
    """The model of the live test: a client sending 64 KiB requests flat out, waiting out each
    throttle, over 20 s: the total is the quota times the time plus the first window's credit,
    which is at most quota x (samples - 1) windows."""
    m = ClientQuotaManagers(QuotaSettings(11, 1))
    m.configure({entity(client_id="slow"): {PRODUCER_BYTE_RATE: 1.0 * MB}})
    t, total = 0.0, 0
    while t < 20_000:
        total += 65536
        t += m.produce.record("ANONYMOUS", "slow", 65536, t) + 2
    assert 20 * MB <= total <= 20 * MB + 10 * MB
    assert m.produce.sensors[("", "slow")].throttle_ms_total > 0


def test_the_eight_levels_most_specific_first():
    configs = {
        entity(user="u", client_id="c"): {PRODUCER_BYTE_RATE: 1},
        entity(user="u", default_client=True): {PRODUCER_BYTE_RATE: 2},
        entity(user="u"): {PRODUCER_BYTE_RATE: 3},
        entity(default_user=True, client_id="c"): {PRODUCER_BYTE_RATE: 4},
        entity(default_user=True, default_client=True): {PRODUCER_BYTE_RATE: 5},
        entity(default_user=True): {PRODUCER_BYTE_RATE: 6},
        entity(client_id="c"): {PRODUCER_BYTE_RATE: 7},
        entity(default_client=True): {PRODUCER_BYTE_RATE: 8},
    }
    expected_tags = [("u", "c"), ("u", "c"), ("u", ""), ("u", "c"), ("u", "c"), ("u", ""),
                     ("", "c"), ("", "c")]
    levels = list(configs)
    for i, level in enumerate(levels):
        present = {e: configs[e] for e in levels[i:]}
        quota, user_tag, client_tag = resolve(present, PRODUCER_BYTE_RATE, "u", "c")
        assert quota == i + 1, level
        assert (user_tag, client_tag) == expected_tags[i]
        # A sensor's tags find the same quota again once configs change (Kafka's quotaLimit).
        assert quota_of_tags(present, PRODUCER_BYTE_RATE, user_tag, client_tag) == i + 1
    assert resolve({}, PRODUCER_BYTE_RATE, "u", "c") == (None, "", "c")
    # Keys resolve independently: a request quota elsewhere does not hide a byte rate.
    mixed = {entity(user="u"): {REQUEST_PERCENTAGE: 50}, entity(client_id="c"): {PRODUCER_BYTE_RATE: 9}}
    assert resolve(mixed, PRODUCER_BYTE_RATE, "u", "c")[0] == 9


def test_clients_of_a_user_quota_share_one_rate():
    m = ClientQuotaManagers()
    m.configure({entity(user="alice"): {PRODUCER_BYTE_RATE: 1.0 * MB}})
    assert m.produce.record("alice", "a", 6 * MB, 0) == 0
    assert m.produce.record("alice", "b", 6 * MB, 0) > 0             # 12 MB of alice's
    assert list(m.produce.sensors) == [("alice", "")]
    # A new, more specific quota moves the client to a sensor of its own.
    m.configure({entity(user="alice"): {PRODUCER_BYTE_RATE: 1.0 * MB},
                 entity(user="alice", client_id="b"): {PRODUCER_BYTE_RATE: 100.0 * MB}})
    assert m.produce.record("alice", "b", 6 * MB, 0) == 0
    assert m.produce.sensors[("alice", "")].quota == 1.0 * MB


def test_entities_and_values_are_checked_as_kafka_does():
    assert check_entity([(USER, "u"), (CLIENT_ID, None)]) == ((CLIENT_ID, None), (USER, "u"))
    for bad in ([], [(USER, "a"), (USER, "b")], [("ip", "1.2.3.4")], [("topic", "t")]):
        with pytest.raises(ValueError):
            check_entity(bad)
    assert check_value(PRODUCER_BYTE_RATE, 1048576.0) == "1048576"
    assert check_value(REQUEST_PERCENTAGE, 50) == "50.0"
    for key, value in ((PRODUCER_BYTE_RATE, 1.5), ("bogus", 1), (PRODUCER_BYTE_RATE, -1),
                       ("controller_mutation_rate", 1)):
        with pytest.raises(ValueError):
            check_value(key, value)


class _Store:
    def __init__(self):
        self.configs: dict = {}
        self.callbacks: list = []

    def client_quota_configs(self):
        return self.configs

    def subscribe_client_quotas(self, cb):
        self.callbacks.append(cb)
        return lambda: None

    async def alter_client_quotas(self, e, changes):
        c = dict(self.configs.get(e, {}))
        for k, v in changes.items():
            if v is None:
                c.pop(k, None)
            else:
                c[k] = v
        self.configs[e] = c
        for cb in self.callbacks:
            cb()


def test_describe_filters_as_kafka():
    store = _Store()
    q = ClientQuotas(store)
    store.configs = {entity(user="a"): {PRODUCER_BYTE_RATE: "10"},
                     entity(user="a", client_id="c"): {PRODUCER_BYTE_RATE: "20"},
                     entity(default_user=True): {PRODUCER_BYTE_RATE: "30"},
                     entity(client_id="c"): {PRODUCER_BYTE_RATE: "40", "SCRAM-SHA-256": "x"}}
    names = lambda found: [e for e, _ in found]   # noqa: E731
    assert names(q.describe([(USER, 0, "a")], strict=True)) == [entity(user="a")]
    assert sorted(names(q.describe([(USER, 0, "a")], strict=False))) == sorted(
        [entity(user="a"), entity(user="a", client_id="c")])
    assert names(q.describe([(USER, 1, None)], strict=False)) == [entity(default_user=True)]
    assert sorted(names(q.describe([(USER, 2, None)], strict=True))) == [entity(user="a")]
    assert len(q.describe([], strict=False)) == 4
    assert q.describe([(CLIENT_ID, 0, "c")], strict=True)[0][1] == {PRODUCER_BYTE_RATE: 40.0}
    with pytest.raises(ValueError):
        q.describe([(USER, 0, None)], strict=False)


def test_an_alteration_reaches_the_managers():
    store = _Store()
    q = ClientQuotas(store)
    e, changes = q.check_alteration([(CLIENT_ID, "c")], [(PRODUCER_BYTE_RATE, 1024.0, False)])
    asyncio.run(q.alter(e, changes))
    assert store.configs[e] == {PRODUCER_BYTE_RATE: "1024"}
    assert q.managers.produce.enabled
    e, changes = q.check_alteration([(CLIENT_ID, "c")], [(PRODUCER_BYTE_RATE, 0.0, True)])
    asyncio.run(q.alter(e, changes))
    assert not q.managers.produce.enabled


def test_the_quota_collector_renders_kafka_names_on_its_own():
    from prometheus_client import CollectorRegistry, generate_latest

    from broker.metrics.quota_metrics import QuotaCollector
    from broker.stats import RequestStats, RequestTimes

    stats = RequestStats()
    times = RequestTimes(stats, "Produce", received=1.0, started=1.001)
    times.local_done, times.ready, times.write_start, times.throttle_ms = 1.003, 1.010, 1.012, 250
    times.sent(1.015)
    m = ClientQuotaManagers()
    m.configure({entity(user="alice"): {PRODUCER_BYTE_RATE: 1.0 * MB}})
    m.produce.record("alice", "app", 12 * MB, 0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QuotaCollector(stats, m, clock_ms=lambda: 0.0))
    text = generate_latest(registry).decode()
    assert 'kafka_server_quota_byte_rate{clientId="",resource="Produce",user="alice"} 1.2e+06' in text
    assert 'kafka_server_quota_throttle_time{clientId="",resource="Produce",user="alice"} 2000.0' in text
    assert 'strom_quota_limit{clientId="",resource="Produce",user="alice"} 1e+06' in text
    for name, value in (("requestqueuetimems", 1.0), ("localtimems", 2.0), ("remotetimems", 7.0),
                        ("throttletimems", 250.0), ("responsequeuetimems", 2.0),
                        ("responsesendtimems", 3.0)):
        assert f'kafka_network_requestmetrics_{name}_count{{request="Produce"}} 1.0' in text
        line = next(x for x in text.splitlines()
                    if x.startswith(f'kafka_network_requestmetrics_{name}_sum{{request="Produce"}}'))
        assert float(line.split()[-1]) == pytest.approx(value, abs=1e-6)
