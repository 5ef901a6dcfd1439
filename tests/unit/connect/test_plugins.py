"""The plugin registry: Kafka's naming rules, plugin.path directories, entry points."""
from __future__ import annotations

import logging
import textwrap

import pytest

from clients.aio import STROM_VERSION
from clients.connect.connectors.file_sink import FileStreamSinkConnector
from clients.connect.connectors.file_source import FileStreamSourceConnector
from clients.connect.plugins import (BUILTINS, PluginNotFoundError, PluginRegistry,
                                     plugin_types, pruned_name, simple_name)

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"

USER_PLUGINS = '''
from clients.connect.api import SourceConnector, SinkConnector, SourceTask


class TailSourceConnector(SourceConnector):
    def version(self):
        return "7.1"


class HelperNotAPlugin:
    pass


class UpperTransformation:
    def configure(self, configs):
        pass

    def apply(self, record):
        return record


class AlwaysPredicate:
    def configure(self, configs):
        pass

    def test(self, record):
        return True


class CsvConverter:
    KAFKA_NAME = "com.example.CsvConverter"

    def configure(self, configs, is_key):
        pass

    def from_connect_data(self, topic, schema, value):
        return b""

    def to_connect_data(self, topic, value):
        return None, None
'''


def registry(*paths) -> PluginRegistry:
    return PluginRegistry([str(p) for p in paths], entry_points=False)


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_builtin_connectors_by_full_name_simple_name_and_pruned_name():
    plugins = registry()
    for name in (FILE_SOURCE, "FileStreamSourceConnector", "FileStreamSource",
                 " FileStreamSource "):
        assert plugins.connector_class(name) is FileStreamSourceConnector
    assert plugins.resolve("FileStreamSink", "connector") is FileStreamSinkConnector
    assert plugins.describe("FileStreamSink", "connector").class_name == FILE_SINK


def test_an_unknown_name_fails_with_kafkas_message_listing_what_exists():
    with pytest.raises(PluginNotFoundError) as e:
        registry().connector_class("NoSuchConnector")
    assert e.value.message.startswith(
        "Failed to find any class that implements Connector and which name matches "
        "NoSuchConnector, available connectors are: ")
    assert FILE_SOURCE in e.value.message and FILE_SINK in e.value.message
    assert e.value.status == 404
    with pytest.raises(PluginNotFoundError, match="implements Transformation and which name "
                                                  "matches Nope, available transformations are"):
        registry().transformation_class("Nope")
    # a connector's name is no converter's
    with pytest.raises(PluginNotFoundError, match="implements Converter"):
        registry().converter_class("FileStreamSource")


# mapped ahead of their classes; until those exist the lookup must say what is missing
NOT_WRITTEN_YET = {"org.apache.kafka.connect.transforms.Cast$Key",
                   "org.apache.kafka.connect.transforms.Cast$Value"}


def test_every_builtin_loads_as_the_class_that_declares_that_kafka_name():
    plugins = registry()
    for full, type_, target in BUILTINS:
        kind = "connector" if type_ in ("source", "sink") else type_
        try:
            cls = plugins.resolve(full, kind)
        except PluginNotFoundError as e:
            assert full in NOT_WRITTEN_YET, e
            assert target in e.message and "could not be loaded" in e.message
            continue
        assert cls.KAFKA_NAME == full
        assert type_ in plugin_types(cls)
    listed = {(p["class"], p["type"]) for p in plugins.plugins()}
    assert len(listed) >= len(BUILTINS) - len(NOT_WRITTEN_YET)
    assert ("org.apache.kafka.connect.storage.StringConverter", "header_converter") in listed


def test_builtin_converters_transformations_and_predicates_by_alias():
    plugins = registry()
    assert plugins.converter_class("String").KAFKA_NAME.endswith("storage.StringConverter")
    assert plugins.converter_class("JsonConverter").KAFKA_NAME.endswith("json.JsonConverter")
    assert plugins.header_converter_class("Simple").__name__ == "SimpleHeaderConverter"
    assert plugins.header_converter_class("StringConverter").__name__ == "StringConverter"
    assert plugins.transformation_class(
        "org.apache.kafka.connect.transforms.InsertField$Value").__name__ == "InsertFieldValue"
    assert plugins.transformation_class("RegexRouter").__name__ == "RegexRouter"
    assert plugins.predicate_class("TopicNameMatches").__name__ == "TopicNameMatches"
    assert plugins.connector_class("SyslogSource").__name__ == "SyslogSourceConnector"
    with pytest.raises(PluginNotFoundError, match="implements Predicate"):
        plugins.predicate_class("RegexRouter")


def test_the_alias_rules():
    assert simple_name("org.apache.kafka.connect.transforms.InsertField$Value") == "Value"
    assert pruned_name("a.b.MySourceConnector", "source") == "MySource"
    assert pruned_name("a.b.Connector", "sink") == "Connector"     # nothing left: unchanged
    assert pruned_name("a.SimpleHeaderConverter", "header_converter") == "Simple"
    assert pruned_name("a.UpperTransformation", "transformation") == "Upper"
    aliases = registry().aliases()
    assert aliases["FileStreamSource"] == FILE_SOURCE
    assert "Value" not in aliases       # InsertField$Value, ReplaceField$Value, ...: ambiguous


def test_builtin_table_names_the_kafka_classes_the_contract_lists():
    names = {full for full, _, _ in BUILTINS}
    for expected in (FILE_SOURCE, FILE_SINK, "io.strom.connect.syslog.SyslogSourceConnector",
                     "org.apache.kafka.connect.storage.StringConverter",
                     "org.apache.kafka.connect.json.JsonConverter",
                     "org.apache.kafka.connect.storage.SimpleHeaderConverter",
                     "org.apache.kafka.connect.transforms.RegexRouter",
                     "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"):
        assert expected in names


def test_plugin_path_files_are_registered_with_their_aliases(tmp_path):
    write(tmp_path / "plugins" / "tail.py", USER_PLUGINS)
    plugins = registry(tmp_path / "plugins")
    tail = plugins.connector_class("tail.TailSourceConnector")
    assert tail.__name__ == "TailSourceConnector"
    assert plugins.connector_class("TailSource") is tail
    assert plugins.connector_class("TailSourceConnector") is tail
    upper = plugins.transformation_class("Upper")
    assert plugins.transformation_class("tail.UpperTransformation") is upper
    assert plugins.predicate_class("AlwaysPredicate").__name__ == "AlwaysPredicate"
    assert plugins.converter_class("com.example.CsvConverter") is plugins.converter_class("Csv")
    with pytest.raises(PluginNotFoundError):
        plugins.connector_class("HelperNotAPlugin")
    listed = {p["class"]: p for p in plugins.plugins("connector")}
    assert listed["tail.TailSourceConnector"] == {"class": "tail.TailSourceConnector",
                                                  "type": "source", "version": "7.1"}
    assert listed[FILE_SINK] == {"class": FILE_SINK, "type": "sink", "version": STROM_VERSION}
    assert {p["type"] for p in plugins.plugins("connector")} == {"source", "sink"}
    assert {"class": "tail.AlwaysPredicate", "type": "predicate", "version": STROM_VERSION} \
        in plugins.plugins("predicate")


def test_a_plugin_package_with_relative_imports(tmp_path):
    write(tmp_path / "plugins" / "mypkg" / "__init__.py", "from .sink import ToNowhereConnector\n")
    write(tmp_path / "plugins" / "mypkg" / "sink.py", """
        from clients.connect.api import SinkConnector
        from .util import VERSION

        class ToNowhereConnector(SinkConnector):
            def version(self):
                return VERSION
        """)
    write(tmp_path / "plugins" / "mypkg" / "util.py", "VERSION = '2.0'\n")
    plugins = registry(tmp_path / "plugins")
    cls = plugins.connector_class("ToNowhere")
    assert plugins.describe("ToNowhere", "connector").class_name == "mypkg.sink.ToNowhereConnector"
    assert cls().version() == "2.0"


def test_a_broken_plugin_file_is_logged_and_skipped(tmp_path, caplog):
    write(tmp_path / "plugins" / "broken.py", "raise RuntimeError('boom at import')\n")
    write(tmp_path / "plugins" / "syntax.py", "def (:\n")
    write(tmp_path / "plugins" / "tail.py", USER_PLUGINS)
    with caplog.at_level(logging.ERROR, logger="clients.connect.plugins"):
        plugins = registry(tmp_path / "plugins", tmp_path / "missing-dir")
    assert plugins.connector_class("TailSource").__name__ == "TailSourceConnector"
    logged = caplog.text
    assert str(tmp_path / "plugins" / "broken.py") in logged and "boom at import" in logged
    assert str(tmp_path / "plugins" / "syntax.py") in logged
    assert str(tmp_path / "missing-dir") in logged


def test_the_same_file_name_in_two_directories_makes_both_aliases_ambiguous(tmp_path):
    for d in ("one", "two"):
        write(tmp_path / d / f"mod_{d}.py", f"""
            from clients.connect.api import SourceConnector

            class DupConnector(SourceConnector):
                def version(self):
                    return "{d}"
            """)
    write(tmp_path / "one" / "same.py", "X = 1\n")
    write(tmp_path / "two" / "same.py", "X = 2\n")    # same module name, separate namespaces
    plugins = registry(tmp_path / "one", tmp_path / "two")
    assert plugins.connector_class("mod_one.DupConnector")().version() == "one"
    assert plugins.connector_class("mod_two.DupConnector")().version() == "two"
    with pytest.raises(PluginNotFoundError):
        plugins.connector_class("Dup")


def test_entry_points_of_installed_distributions(tmp_path, monkeypatch):
    write(tmp_path / "strom_ep_test_plugin.py", """
        from clients.connect.api import SinkConnector

        class WebhookSinkConnector(SinkConnector):
            KAFKA_NAME = "com.example.WebhookSinkConnector"
        """)
    write(tmp_path / "strom_ep_test_plugin-1.0.dist-info" / "METADATA",
          "Metadata-Version: 2.1\nName: strom-ep-test-plugin\nVersion: 1.0\n")
    write(tmp_path / "strom_ep_test_plugin-1.0.dist-info" / "entry_points.txt",
          "[strom.connect.plugins]\nwebhook = strom_ep_test_plugin:WebhookSinkConnector\n"
          "broken = strom_ep_test_plugin:NoSuchClass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = PluginRegistry([])
    cls = plugins.connector_class("WebhookSink")
    assert cls.__module__ == "strom_ep_test_plugin"
    assert {"class": "com.example.WebhookSinkConnector", "type": "sink",
            "version": STROM_VERSION} in plugins.plugins("sink")
