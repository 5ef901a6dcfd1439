"""What every plugin that is not a connector has: Kafka's class name (`KAFKA_NAME`, for the
registry's listing), its declared configs, `close()` and a version."""
from __future__ import annotations

from typing import ClassVar

from .config_def import ConfigDef

__all__ = ["Plugin"]


class Plugin:
    KAFKA_NAME: ClassVar[str] = ""

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        pass

    def version(self) -> str:
        from clients.aio import STROM_VERSION
        return STROM_VERSION
