"""ApiVersions: answered from the handler registry, so advertised == implemented.

v3+ also names the features the cluster has finalized (KIP-584): `transaction.version` at
level 2, so clients that know it (Kafka's Java client 4.x) use transaction version 2 (KIP-890
part 2: EndTxn v5, Produce v12 and TxnOffsetCommit v5 without AddPartitionsToTxn or
AddOffsetsToTxn, the epoch bumped at every end). Clients that do not read features keep
transaction version 0; the brokers serve both."""
from __future__ import annotations

from ..dispatch import RequestContext, advertised_versions, handles

TRANSACTION_VERSION = 2
# A client adopts the features of the answer with the highest epoch it saw; -1 means none.
FINALIZED_FEATURES_EPOCH = 1


@handles("ApiVersions", (0, 4))
def api_versions(services: object, request, ctx: RequestContext) -> dict:
    # KAFKA-17011: Java clients before 3.9 (ApiVersions v3) refuse a supported feature whose
    # min version is 0, so Kafka tells them 1; v4 askers get the true range.
    min_supported = 0 if ctx.version >= 4 else 1
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                     for k, lo, hi in advertised_versions()],
        "throttle_time_ms": 0,
        "supported_features": [{"name": "transaction.version", "min_version": min_supported,
                                "max_version": TRANSACTION_VERSION}],
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": [{"name": "transaction.version",
                                "max_version_level": TRANSACTION_VERSION,
                                "min_version_level": TRANSACTION_VERSION}],
    }
