#!/usr/bin/env bash
# DELETE /v3/clusters/{cluster_id}/topics/{topic_name}: delete a topic; 204.
# Usage: v3_delete_topic.sh PROXY_URL CLUSTER_ID TOPIC
set -euo pipefail
curl -s -i -X DELETE "$1/v3/clusters/$2/topics/$3"
