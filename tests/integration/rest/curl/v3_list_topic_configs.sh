#!/usr/bin/env bash
# GET /v3/clusters/{cluster_id}/topics/{topic_name}/configs: every config of a topic (KafkaTopicConfigList).
# Usage: v3_list_topic_configs.sh PROXY_URL CLUSTER_ID TOPIC
set -euo pipefail
curl -s -i "$1/v3/clusters/$2/topics/$3/configs"
