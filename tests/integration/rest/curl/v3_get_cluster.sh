#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}: one cluster (KafkaCluster).
# Usage: v3_get_cluster.sh PROXY_URL CLUSTER_ID
set -euo pipefail
curl -s -i "$1/v3/clusters/$2"
