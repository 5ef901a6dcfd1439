#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/topics/{topic_name}: one topic (KafkaTopic).
# Usage: v3_get_topic.sh PROXY_URL CLUSTER_ID TOPIC
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/topics/$3"
