"""Kafka Connect for strom: workers (standalone and distributed), Connect's REST API, the
FileStream and syslog connectors, converters, transforms, and the API for connectors
written in Python (docs/CONNECT.md):

    from clients.connect import SourceConnector, SourceTask, SourceRecord, ConfigDef, Type

A worker is started with bin/connect-standalone.sh or bin/connect-distributed.sh
(`clients.connect.main`).
"""
from .api import (ConnectError, ConnectRecord, Connector, ConnectorContext, ExactlyOnceSupport,
                  OffsetStorageReader, RetriableError, SinkConnector, SinkRecord, SinkTask,
                  SinkTaskContext, SourceConnector, SourceRecord, SourceTask, SourceTaskContext,
                  Task)
from .config_def import (ConfigDef, ConfigException, ConfigKey, ConfigValue, Importance, Type,
                         Width)

__all__ = ["ConnectError", "ConnectRecord", "Connector", "ConnectorContext", "ExactlyOnceSupport",
           "OffsetStorageReader", "RetriableError", "SinkConnector", "SinkRecord", "SinkTask",
           "SinkTaskContext", "SourceConnector", "SourceRecord", "SourceTask",
           "SourceTaskContext", "Task", "ConfigDef", "ConfigException", "ConfigKey",
           "ConfigValue", "Importance", "Type", "Width"]
