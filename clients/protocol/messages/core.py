"""Core data-path APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets, ..."""
from ..schema import Api, F

ApiVersions = Api(
    key=18, name="ApiVersions", valid=(0, 3), flexible=3,
    request=[
        F("client_software_name", "string", versions="3+"),
        F("client_software_version", "string", versions="3+"),
    ],
    response=[
        F("error_code", "int16"),
        F("api_keys", [
            F("api_key", "int16"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ]),
        F("throttle_time_ms", "int32", versions="1+"),
        F("supported_features", [
            F("name", "string"),
            F("min_version", "int16"),
            F("max_version", "int16"),
        ], versions="3+", tag=0),
        F("finalized_features_epoch", "int64", versions="3+", tag=1, default=-1),
        F("finalized_features", [
            F("name", "string"),
            F("max_version_level", "int16"),
            F("min_version_level", "int16"),
        ], versions="3+", tag=2),
        F("zk_migration_ready", "bool", versions="3+", tag=3),
    ],
)

APIS: list[Api] = [ApiVersions]
