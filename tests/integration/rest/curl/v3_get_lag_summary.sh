#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lag-summary: a group's max and total lag (KafkaConsumerGroupLagSummary).
# Usage: v3_get_lag_summary.sh PROXY_URL CLUSTER_ID GROUP
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/consumer-groups/$3/lag-summary"
