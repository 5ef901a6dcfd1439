#!/usr/bin/env bash
# GET /v3/clusters: the Kafka cluster this proxy serves (KafkaClusterList).
# Usage: v3_list_clusters.sh PROXY_URL
set -euo pipefail
curl -s -i "$1/v3/clusters"
