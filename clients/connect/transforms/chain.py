"""A connector's transformations, built from its config and applied in order (Kafka's
TransformationChain with ConnectorConfig's keys).

    transforms=route,drop
    transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
    transforms.route.regex=(.*)-raw
    transforms.route.replacement=$1
    transforms.drop.type=Filter
    transforms.drop.predicate=isTombstone
    transforms.drop.negate=false
    predicates=isTombstone
    predicates.isTombstone.type=org.apache.kafka.connect.transforms.predicates.RecordIsTombstone

Each transformation is configured with its `transforms.<alias>.*` keys, prefix removed
(`predicate` and `negate` taken out); each predicate (one instance per transformation
using it) with its `predicates.<alias>.*` keys. A bad config raises ConfigException naming
the full key (e.g. "transforms.route.regex"). A chain belongs to one task: not thread-safe.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from ..api import ConnectRecord
from ..config_def import ConfigException

__all__ = ["TransformationChain", "TransformationStage"]

Resolve = Callable[[str, str], type]


class TransformationStage:
    """One transformation, applied when its predicate (if any) tests true (false if negated)."""

    __slots__ = ("alias", "transformation", "predicate", "negate")

    def __init__(self, alias: str, transformation: Any, predicate: Any = None,
                 negate: bool = False):
        self.alias = alias
        self.transformation = transformation
        self.predicate = predicate
        self.negate = negate

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        predicate = self.predicate
        if predicate is None or self.negate != bool(predicate.test(record)):
            return self.transformation.apply(record)
        return record

    def close(self) -> None:
        try:
            self.transformation.close()
        finally:
            if self.predicate is not None:
                self.predicate.close()

    def __repr__(self) -> str:
        return (f"TransformationStage{{alias={self.alias}, transformation={self.transformation!r}, "
                f"predicate={self.predicate!r}, negate={self.negate}}}")


def _aliases(config: Mapping[str, Any], key: str) -> list[str]:
    raw = config.get(key)
    if raw is None:
        return []
    items = [str(x).strip() for x in raw] if isinstance(raw, (list, tuple)) else (
        [p.strip() for p in str(raw).split(",")] if str(raw).strip() else [])
    if len(set(items)) != len(items):
        raise ConfigException(key, raw, "Duplicate alias provided.")
    return items


def _with_prefix(config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


def _instance(config: Mapping[str, Any], type_key: str, kind: str, resolve: Resolve) -> Any:
    """A new instance of the class `type_key` names, checked to be a `kind`."""
    name = config.get(type_key)
    if name is None or not str(name).strip():
        raise ConfigException(type_key, None, f'Missing required configuration "{type_key}" '
                                              f'which has no default value.')
    name = str(name).strip()
    try:
        cls = resolve(name, kind)
    except ConfigException as e:
        raise (e if e.key == type_key else ConfigException(type_key, name, e.reason)) from e
    except Exception as e:      # the registry's "Failed to find any class that implements ..."
        raise ConfigException(type_key, name, getattr(e, "message", None) or str(e)) from e
    try:
        instance = cls()
    except Exception as e:
        raise ConfigException(type_key, name, f"Could not instantiate {name}: {e}") from e
    method = "apply" if kind == "transformation" else "test"
    if not callable(getattr(instance, method, None)):
        raise ConfigException(type_key, name, "Not a " + kind.capitalize())
    return instance


def _configure(instance: Any, configs: dict[str, Any], prefix: str, type_key: str) -> None:
    """configure(), its errors named by the full key."""
    try:
        instance.configure(configs)
    except ConfigException as e:
        raise ConfigException(prefix + e.key, e.value, e.reason) from e
    except Exception as e:
        raise ConfigException(type_key, configs.get("type"), f"configure() failed: {e}") from e


class TransformationChain:
    """The stages in order; `apply` gives the transformed record or None (dropped).
    `transformations` is the list of stages (empty: nothing to do)."""

    def __init__(self, stages: Iterable[TransformationStage] = ()):
        self.transformations: list[TransformationStage] = list(stages)

    @classmethod
    def from_connector_config(cls, config: Mapping[str, Any],
                              resolve: Resolve) -> "TransformationChain":
        """Build and configure every transformation and predicate the config names.
        `resolve(name, kind)` (kind "transformation" or "predicate") gives the class."""
        predicate_aliases = _aliases(config, "predicates")
        for alias in predicate_aliases:     # each listed predicate must resolve and configure
            p_prefix = f"predicates.{alias}."
            checked = _instance(config, p_prefix + "type", "predicate", resolve)
            _configure(checked, _with_prefix(config, p_prefix), p_prefix, p_prefix + "type")
            checked.close()
        stages: list[TransformationStage] = []
        try:
            for alias in _aliases(config, "transforms"):
                stages.append(cls._stage(config, alias, resolve))
        except BaseException:
            for stage in stages:
                stage.close()
            raise
        return cls(stages)

    @staticmethod
    def _stage(config: Mapping[str, Any], alias: str, resolve: Resolve) -> TransformationStage:
        prefix = f"transforms.{alias}."
        type_key = prefix + "type"
        transformation = _instance(config, type_key, "transformation", resolve)
        own = _with_prefix(config, prefix)
        predicate_alias = own.pop("predicate", None)
        negate_raw = own.pop("negate", None)
        if negate_raw is not None and predicate_alias is None:
            raise ConfigException(prefix + "negate", negate_raw,
                                  f"Config '{prefix}negate' was provided but there is no config "
                                  f"'{prefix}predicate' defining a predicate to be negated.")
        negate = False
        if negate_raw is not None:
            text = str(negate_raw).strip().lower()
            if text not in ("true", "false"):
                raise ConfigException(prefix + "negate", negate_raw,
                                      "Expected value to be either true or false")
            negate = text == "true"
        _configure(transformation, own, prefix, type_key)
        predicate = None
        if predicate_alias is not None and str(predicate_alias).strip():
            p_prefix = f"predicates.{str(predicate_alias).strip()}."
            try:
                predicate = _instance(config, p_prefix + "type", "predicate", resolve)
                _configure(predicate, _with_prefix(config, p_prefix), p_prefix, p_prefix + "type")
            except BaseException:
                transformation.close()
                raise
        return TransformationStage(alias, transformation, predicate, negate)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        for stage in self.transformations:
            out = stage.apply(record)
            if out is None:
                return None
            record = out
        return record

    def close(self) -> None:
        """Close every transformation and predicate (all of them, even if one fails)."""
        errors = []
        for stage in self.transformations:
            try:
                stage.close()
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def __len__(self) -> int:
        return len(self.transformations)

    def __repr__(self) -> str:
        return f"TransformationChain{{{self.transformations}}}"
