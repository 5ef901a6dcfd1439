#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/brokers/{broker_id}: one broker (KafkaBroker).
# Usage: v3_get_broker.sh PROXY_URL CLUSTER_ID BROKER_ID
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/brokers/$3"
