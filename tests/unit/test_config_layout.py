"""broker.config is a package of small modules with one job each: the names the rest of strom
imports from ``broker.config`` stay there, every module stays under 600 lines, and the seams
between the modules (layers, synonyms, dynamic layering, topic defaults) work on their own."""
from __future__ import annotations

import importlib
import logging
from pathlib import Path

import broker.config as C
from broker.config.broker_keys import first_set_value
from broker.config.describe import ConfigLayers
from broker.config.dynamic import layer_dynamic
from broker.config.topic_configs import topic_defaults, typed_topic_config

PACKAGE = Path(C.__file__).parent

# Every public name of the single-module broker.config, which callers may still import.
NAMES_BEFORE_THE_SPLIT = {
    "BROKER_CONFIG", "BROKER_CONFIGS", "BrokerConfig", "CONFIG_SOURCE_IDS", "CONFIG_TYPE_IDS",
    "CW", "ConfigEntry", "ConfigError", "ConfigKey", "ConfigSynonym", "DEFAULT", "DYNAMIC_APPLIED",
    "DYNAMIC_BROKER", "DYNAMIC_DEFAULT", "INT_MAX", "LONG_MAX", "ListOf", "Listener", "OneOf",
    "PB", "Property", "RO", "Range", "SECURITY_PROTOCOLS", "STATIC", "TOPIC", "TOPIC_CONFIG",
    "TOPIC_CONFIGS", "TopicConfigs", "Validator", "broker_synonyms", "main", "parse_listeners",
    "parse_properties", "parse_protocol_map", "read_properties", "to_config_string",
}


def test_public_names_of_the_old_module_are_still_exported():
    assert NAMES_BEFORE_THE_SPLIT <= set(C.__all__)
    for name in C.__all__:
        assert getattr(C, name) is not None, name


def test_every_module_is_small():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert len(sizes) > 5
    assert {name: n for name, n in sizes.items() if n > 600} == {}


def test_modules_log_under_the_package_name():
    """Operators filter broker logs on "broker.config", the name from before the split."""
    for p in PACKAGE.glob("*.py"):
        mod = importlib.import_module(f"broker.config.{p.stem}")
        log = getattr(mod, "log", None)
        if isinstance(log, logging.Logger):
            assert log.name == "broker.config", p.name


def test_layers_supply_a_value_in_kafkas_precedence():
    layers = ConfigLayers(dynamic_broker={"a": "1"}, dynamic_default={"a": "2", "b": "2"},
                          static={"a": "3", "b": "3", "c": "3"})
    assert [layers.source(k) for k in "abcd"] == [
        C.DYNAMIC_BROKER, C.DYNAMIC_DEFAULT, C.STATIC, C.DEFAULT]


def test_first_set_synonym_is_scaled_to_milliseconds():
    keys = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
    assert first_set_value(keys, {"log.retention.ms": None, "log.retention.minutes": 2,
                                  "log.retention.hours": 5}) == 120000
    assert first_set_value(keys, dict.fromkeys(keys)) is None


def test_dynamic_layering_keeps_what_applies_and_skips_the_rest(caplog):
    static = C.BrokerConfig.from_dict({"log.dirs": "/tmp/strom-unused"}).values()
    with caplog.at_level(logging.WARNING, logger="broker.config"):
        values, layers = layer_dynamic(static, {"log.retention.ms": " 5 ", "listeners": "x"},
                                       {"log.segment.bytes": "3000000"})
    assert values["log.retention.ms"] == 5 and values["log.segment.bytes"] == 3000000
    assert values["listeners"] == static["listeners"]
    assert layers == {C.DYNAMIC_DEFAULT: {"log.retention.ms": "5"},
                      C.DYNAMIC_BROKER: {"log.segment.bytes": "3000000"}}
    assert any("listeners" in r.getMessage() for r in caplog.records)


def test_topic_defaults_come_from_broker_values_alone():
    cfg = C.BrokerConfig.from_dict({"log.dirs": "/tmp/strom-unused", "log.roll.hours": "2"})
    defaults = topic_defaults(cfg.values())
    assert defaults == cfg.topic_defaults() and defaults["segment.ms"] == "7200000"
    assert typed_topic_config(defaults, {"segment.ms": "5"})["segment.ms"] == 5
