"""Client quota enforcement (Kafka's ClientQuotaManager, ClientRequestQuotaManager and
DefaultQuotaCallback): sans-io, the caller passes the time in milliseconds.

Each quota type (produce bytes, fetch bytes, request time) keeps one sensor per metric tags
(user, client-id) that `entities.resolve` gives a connection: connections with the same tags
share one rate, as in Kafka (a user-level quota is shared by all of that user's clients).
Recording a value returns the time the client must be throttled for: 0 within the quota,
otherwise (rate - quota) / quota x the rate's window (Kafka's QuotaUtils.throttleTime). A
broker with no quota of a type configured does no work for it beyond one attribute test.

Single event-loop thread.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping

from .entities import (CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, QuotaEntity,
                       quota_of_tags,
                       resolve)
from .rate import SampledRate

log = logging.getLogger("strom.quota")

__all__ = ["QuotaSettings", "QuotaSensor", "QuotaType", "ClientQuotaManagers"]

# A sensor nobody recorded into for this long is dropped (Kafka's inactive sensor expiry).
SENSOR_EXPIRY_MS = 3600_000


@dataclass(frozen=True)
class QuotaSettings:
    """Kafka's quota.window.num and quota.window.size.seconds."""

    samples: int = 11
    window_s: int = 1

    @classmethod
    def from_config(cls, config: Any) -> "QuotaSettings":
        """From a BrokerConfig: the declared keys, or as written when the config does not
        declare them (then they are among its unknown keys)."""
        def read(key: str, default: int) -> int:
            try:
                return int(config.get(key))
            except KeyError:
                return int(getattr(config, "unknown", {}).get(key, default))
        return cls(read("quota.window.num", 11), read("quota.window.size.seconds", 1))


class QuotaSensor:
    """One (user, client-id) of one quota type: its rate, the quota it is held to, and the
    throttle times given (Kafka's byte-rate / request-time and throttle-time metrics)."""

    __slots__ = ("user", "client_id", "quota", "rate", "throttle_ms", "throttles", "last_ms",
                 "throttle_ms_total")

    def __init__(self, user: str, client_id: str, quota: float | None, settings: QuotaSettings,
                 now_ms: float):
        self.user = user
        self.client_id = client_id
        self.quota = quota
        window_ms = settings.window_s * 1000
        self.rate = SampledRate(settings.samples, window_ms, now_ms)
        self.throttle_ms = SampledRate(settings.samples, window_ms, now_ms)
        self.throttles = SampledRate(settings.samples, window_ms, now_ms)
        self.throttle_ms_total = 0
        self.last_ms = now_ms

    def record(self, value: float, now_ms: float) -> int:
        """Add `value`; the throttle time in ms it earns (0 within the quota)."""
        self.last_ms = now_ms
        rate = self.rate
        rate.record(value, now_ms)
        quota = self.quota
        if quota is None:
            return 0
        total, window = rate.total_and_window(now_ms)
        observed = total * 1000.0 / window
        if observed <= quota:
            return 0
        throttle = round((observed - quota) / quota * window)
        if throttle > 0:
            self.throttle_ms.record(throttle, now_ms)
            self.throttles.record(1, now_ms)
            self.throttle_ms_total += throttle
        return throttle

    def avg_throttle_ms(self, now_ms: float) -> float:
        """The mean throttle time over the windows kept (Kafka's throttle-time: Avg)."""
        n = self.throttles.total(now_ms)
        return self.throttle_ms.total(now_ms) / n if n > 0 else 0.0


class QuotaType:
    """One quota key's sensors (Kafka: the Produce, Fetch or Request quota manager)."""

    def __init__(self, key: str, settings: QuotaSettings):
        self.key = key
        self.settings = settings
        self.sensors: dict[tuple[str, str], QuotaSensor] = {}
        self._by_client: dict[tuple[str, str], QuotaSensor] = {}   # (user, client-id) -> sensor
        self._configs: Mapping[QuotaEntity, Mapping[str, float]] = {}
        self.enabled = False

    def configure(self, configs: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """New quota configs: every sensor is held to the quota its tags now resolve to."""
        self._configs = configs
        self.enabled = any(self.key in c for c in configs.values())
        self._by_client.clear()
        for sensor in self.sensors.values():
            sensor.quota = quota_of_tags(configs, self.key, sensor.user, sensor.client_id)

    def sensor(self, user: str, client_id: str, now_ms: float) -> QuotaSensor:
        s = self._by_client.get((user, client_id))
        if s is not None:
            return s
        quota, user_tag, client_tag = resolve(self._configs, self.key, user, client_id)
        s = self.sensors.get((user_tag, client_tag))
        if s is None:
            s = self.sensors[(user_tag, client_tag)] = QuotaSensor(
                user_tag, client_tag, quota, self.settings, now_ms)
        self._by_client[(user, client_id)] = s
        return s

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record `value` for a client; the throttle time in ms (0 when no quota applies)."""
        if not self.enabled:
            return 0
        return self.sensor(user, client_id, now_ms).record(value, now_ms)

    def expire(self, now_ms: float) -> None:
        """Drop sensors idle for an hour (a client that went away leaves no series)."""
        idle = [k for k, s in self.sensors.items() if now_ms - s.last_ms > SENSOR_EXPIRY_MS]
        for k in idle:
            del self.sensors[k]
        if idle:
            self._by_client.clear()


class ClientQuotaManagers:
    """The broker's three quota types over one set of quota configs (Kafka's QuotaManagers)."""

    def __init__(self, settings: QuotaSettings | None = None):
        self.settings = settings or QuotaSettings()
        self.produce = QuotaType(PRODUCER_BYTE_RATE, self.settings)
        self.fetch = QuotaType(CONSUMER_BYTE_RATE, self.settings)
        self.request = QuotaType(REQUEST_PERCENTAGE, self.settings)
        self.configs: Mapping[QuotaEntity, Mapping[str, float]] = {}

    @property
    def types(self) -> tuple[QuotaType, QuotaType, QuotaType]:
        return self.produce, self.fetch, self.request

    @property
    def enabled(self) -> bool:
        return self.produce.enabled or self.fetch.enabled or self.request.enabled

    def configure(self, configs: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self.configs = configs
        for t in self.types:
            t.configure(configs)
        log.info("client quotas in force: %s", _describe(configs) or "none")


def _describe(configs: Mapping[QuotaEntity, Mapping[str, float]]) -> str:
    return "; ".join(
        ",".join(f"{t}={n if n is not None else '<default>'}" for t, n in e) + " "
        + ",".join(f"{k}={v:g}" for k, v in sorted(c.items()))
        for e, c in sorted(configs.items(), key=lambda ec: repr(ec[0])))
