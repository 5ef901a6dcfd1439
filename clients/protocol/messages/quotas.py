"""Client quota APIs (KIP-546): DescribeClientQuotas and AlterClientQuotas.

Declared from Kafka's message specs (DescribeClientQuotas{Request,Response}.json,
AlterClientQuotas{Request,Response}.json). An entity is a list of (entity_type, entity_name)
with entity types "user", "client-id" (and "ip", which strom does not keep); a null name is
the default entity of its type.
"""
from ..schema import Api, F

# DescribeClientQuotas filter components' match types.
MATCH_EXACT = 0          # the name in `match`
MATCH_DEFAULT = 1        # the default entity of the type
MATCH_SPECIFIED = 2      # any entity of the type that is not the default

_ENTITY = [
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+", about="null: the default entity of its type"),
]

DescribeClientQuotas = Api(
    key=48, name="DescribeClientQuotas", valid=(0, 1), flexible=1,
    request=[
        F("components", [
            F("entity_type", "string"),
            F("match_type", "int8", about="0 exact name, 1 default, 2 any specified name"),
            F("match", "string", nullable="0+"),
        ]),
        F("strict", "bool", about="exclude entities with entity types not in the filter"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F("entries", [
            F("entity", _ENTITY),
            F("values", [
                F("key", "string"),
                F("value", "float64"),
            ]),
        ], nullable="0+"),
    ],
)

AlterClientQuotas = Api(
    key=49, name="AlterClientQuotas", valid=(0, 1), flexible=1,
    request=[
        F("entries", [
            F("entity", _ENTITY),
            F("ops", [
                F("key", "string"),
                F("value", "float64"),
                F("remove", "bool"),
            ]),
        ]),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("entries", [
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+"),
            F("entity", _ENTITY),
        ]),
    ],
)

APIS: list[Api] = [DescribeClientQuotas, AlterClientQuotas]
