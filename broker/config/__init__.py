"""Typed broker configuration from a Java-style ``.properties`` file, with Kafka's names and defaults.

Contract
--------
* ``BrokerConfig.load(path, overrides)`` reads the file the way ``java.util.Properties`` does
  (``#``/``!`` comments, ``=``/``:``/whitespace separators, backslash line continuations,
  ``\\t \\n \\r \\f \\\\ \\uXXXX`` escapes), then types and validates every known key against the
  declarative table ``BROKER_CONFIGS``. ``overrides`` (``--override k=v``) win over the file and,
  as in Kafka, count as static broker config.
* Unknown keys are logged as a WARNING naming the key and the file; they are never an error.
  Known keys that strom accepts but does not act on (thread counts) are logged at INFO.
* A bad value raises ``ConfigError`` whose message names the file, the line and the key:
  ``config/server.properties:12: num.partitions: 'abc' is not an integer``. Every bad line is
  reported at once (one per message line); ``ConfigError.key`` is the first bad key.
* Defaults, ranges, synonyms and update modes are Kafka's (3.x ZooKeeper mode, plus the
  3.6+ ``message.timestamp.before/after.max.ms``). ``TOPIC_CONFIGS`` declares every topic config
  with the broker keys that supply its default ("synonyms", in Kafka's order of precedence),
  which is what DescribeConfigs reports.

strom-specific choices (documented, deliberate)
-----------------------------------------------
* Relative paths in ``log.dirs``/``log.dir`` are resolved against the current working directory
  *at load time*; ``cfg.log_dirs`` holds absolute paths (``cfg.get("log.dirs")`` the raw list).
* A listener with an empty host (``PLAINTEXT://:9092``) binds ``0.0.0.0`` and is advertised as
  ``127.0.0.1`` (Kafka would advertise the canonical host name; strom is loopback-first).
  Advertising ``0.0.0.0``/``::`` is refused as Kafka refuses it: set ``advertised.listeners``.
  Port 0 binds an ephemeral port; the server must advertise the port it actually bound.
* ``broker.id`` -1 (the default) means 0 when standalone (no ``zookeeper.connect``); with
  ZooKeeper it stays -1 for the coordinator to generate (Kafka's broker.id.generation.enable).

A ``BrokerConfig`` changes only through ``set_dynamic`` (dynamic broker configs), on the
broker's event loop; read it there. Everything else treats it as read-only.

Modules, one job each
---------------------
value_types    raw string <-> typed value of a key's type, printed as Kafka prints it
validators     ranges, fixed sets and custom checks of typed values
keys           ConfigKey: what one declared key is
listeners      NAME://host:port endpoints and the listener -> security protocol map
broker_keys    the broker's keys (declaration table) and their millisecond synonyms
topic_keys     the topic keys (declaration table) and the broker keys behind their defaults
loading        the file and --override values, typed key by key, errors naming file:line: key
broker_config  BrokerConfig: the typed object, derived attributes, cross-key checks
dynamic        dynamic broker configs: what AlterConfigs may set, and the layered values
describe       DescribeConfigs entries, sources and synonyms
throttles      replication throttles: the broker's rates, a topic's throttled replicas
topic_configs  topic overrides validated (TopicConfigs), topic defaults from broker keys
cli            python -m broker.config FILE: print the effective config
"""
from __future__ import annotations

from clients.properties import ConfigError, Property, parse_properties, read_properties

from .broker_config import BrokerConfig
from .broker_keys import BROKER_CONFIG, BROKER_CONFIGS, CW, PB, RO, broker_synonyms
from .cli import main
from .describe import (CONFIG_SOURCE_IDS, CONFIG_TYPE_IDS, DEFAULT, DYNAMIC_BROKER, DYNAMIC_DEFAULT,
                       STATIC, TOPIC, ConfigEntry, ConfigLayers, ConfigSynonym)
from .dynamic import DYNAMIC_APPLIED
from .keys import ConfigKey
from .listeners import SECURITY_PROTOCOLS, Listener, parse_listeners, parse_protocol_map
from .topic_configs import TopicConfigs
from .topic_keys import TOPIC_CONFIG, TOPIC_CONFIGS
from .validators import ListOf, OneOf, Range, Validator
from .value_types import INT_MAX, LONG_MAX, ConfigValue, to_config_string

__all__ = [
    "BROKER_CONFIG", "BROKER_CONFIGS", "CONFIG_SOURCE_IDS", "CONFIG_TYPE_IDS", "CW", "DEFAULT",
    "DYNAMIC_APPLIED", "DYNAMIC_BROKER", "DYNAMIC_DEFAULT", "INT_MAX", "LONG_MAX", "PB", "RO",
    "SECURITY_PROTOCOLS", "STATIC", "TOPIC", "TOPIC_CONFIG", "TOPIC_CONFIGS", "BrokerConfig",
    "ConfigEntry", "ConfigError", "ConfigKey", "ConfigLayers", "ConfigSynonym", "ConfigValue",
    "Listener", "ListOf", "OneOf", "Property", "Range", "TopicConfigs", "Validator",
    "broker_synonyms", "main", "parse_listeners", "parse_properties", "parse_protocol_map",
    "read_properties", "to_config_string",
]
