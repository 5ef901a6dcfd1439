"""Log dir APIs that no other family holds: AlterReplicaLogDirs (KIP-113) moves replicas
between the log dirs of one broker. (DescribeLogDirs is declared with the admin APIs.)

Declared from Kafka's message spec (clients/src/main/resources/common/message/*.json).
Versions 0 and 1 are the same (v1 only answers before throttling); v2 is flexible.
"""
from ..schema import Api, F

AlterReplicaLogDirs = Api(
    key=34, name="AlterReplicaLogDirs", valid=(0, 2), flexible=2,
    request=[
        F("dirs", [
            F("path", "string", about="the absolute path of a log dir of the broker"),
            F("topics", [
                F("name", "string"),
                F("partitions", "[]int32"),
            ]),
        ]),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("results", [
            F("topic_name", "string"),
            F("partitions", [
                F("partition_index", "int32"),
                F("error_code", "int16"),
            ]),
        ]),
    ],
)

APIS: list[Api] = [AlterReplicaLogDirs]
