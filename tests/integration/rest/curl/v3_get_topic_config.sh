#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/topics/{topic_name}/configs/{name}: one config of a topic (KafkaTopicConfig).
# Usage: v3_get_topic_config.sh PROXY_URL CLUSTER_ID TOPIC NAME
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/topics/$3/configs/$4"
