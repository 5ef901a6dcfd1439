#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/brokers: the cluster's brokers (KafkaBrokerList).
# Usage: v3_list_brokers.sh PROXY_URL CLUSTER_ID
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/brokers"
