"""Single Message Transforms (Kafka's `org.apache.kafka.connect.transforms`): the
Transformation and Predicate interfaces, Kafka's built-in SMTs and predicates, and the
chain a connector's `transforms` / `predicates` keys build. Each concrete class carries
`KAFKA_NAME`, its Kafka class name ("...InsertField$Value")."""
from __future__ import annotations

from .base import KeyValueTransformation, Predicate, Transformation
from .cast import Cast, CastKey, CastValue
from .chain import TransformationChain, TransformationStage
from .extract_field import ExtractField, ExtractFieldKey, ExtractFieldValue
from .filter import Filter
from .hoist_field import HoistField, HoistFieldKey, HoistFieldValue
from .insert_field import InsertField, InsertFieldKey, InsertFieldValue
from .mask_field import MaskField, MaskFieldKey, MaskFieldValue
from .predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from .regex_router import RegexRouter
from .replace_field import ReplaceField, ReplaceFieldKey, ReplaceFieldValue
from .timestamp_router import TimestampRouter
from .value_to_key import ValueToKey

__all__ = ["Transformation", "Predicate", "KeyValueTransformation", "TransformationChain",
           "TransformationStage", "InsertField", "InsertFieldKey", "InsertFieldValue",
           "ReplaceField", "ReplaceFieldKey", "ReplaceFieldValue", "RegexRouter", "Filter",
           "TimestampRouter", "ValueToKey", "HoistField", "HoistFieldKey", "HoistFieldValue",
           "ExtractField", "ExtractFieldKey", "ExtractFieldValue", "MaskField", "MaskFieldKey",
           "MaskFieldValue", "Cast", "CastKey", "CastValue", "TopicNameMatches", "HasHeaderKey",
           "RecordIsTombstone", "BUILTIN_TRANSFORMATIONS", "BUILTIN_PREDICATES"]

BUILTIN_TRANSFORMATIONS: tuple[type[Transformation], ...] = (
    InsertFieldKey, InsertFieldValue, ReplaceFieldKey, ReplaceFieldValue, RegexRouter, Filter,
    TimestampRouter, ValueToKey, HoistFieldKey, HoistFieldValue, ExtractFieldKey,
    ExtractFieldValue, MaskFieldKey, MaskFieldValue, CastKey, CastValue)
BUILTIN_PREDICATES: tuple[type[Predicate], ...] = (TopicNameMatches, HasHeaderKey,
                                                   RecordIsTombstone)
