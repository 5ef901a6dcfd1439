"""A topic's effective configs: the broker's topic defaults (static, then dynamic) under
the topic's own overrides, as a LogConfig for its logs.

Kafka's LogConfig.fromProps(brokerDefaults, topicOverrides). Read on the event loop; the
defaults change only when dynamic broker configs do (broker.dynamic_configs).
"""
from __future__ import annotations

from collections.abc import Mapping

from clients.protocol.errors import InvalidConfigError
from zkcoord.store import TopicMetadata

from .config import BrokerConfig, ConfigError, TopicConfigs
from .log import LogConfig


class TopicConfigResolver:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config

    @staticmethod
    def validate(configs: Mapping[str, str | None]) -> dict[str, str]:
        """The overrides a topic may store (CreateTopics, AlterConfigs); INVALID_CONFIG if not."""
        try:
            return TopicConfigs.validate(configs)
        except ConfigError as e:
            raise InvalidConfigError(str(e)) from None

    def values(self, overrides: Mapping[str, str]) -> dict[str, str]:
        return {**self.config.topic_defaults(), **overrides}

    def log_config_for(self, meta: TopicMetadata) -> LogConfig:
        return LogConfig.from_topic_configs(self.values(meta.configs))

    def default_log_config(self) -> LogConfig:
        return LogConfig.from_topic_configs(self.config.topic_defaults())
