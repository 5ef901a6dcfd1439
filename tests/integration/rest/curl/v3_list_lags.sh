#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags: the lag of every partition the group committed, largest first (KafkaConsumerLagList).
# Usage: v3_list_lags.sh PROXY_URL CLUSTER_ID GROUP
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/consumer-groups/$3/lags"
