#!/usr/bin/env bash
# A topic's partitions: v2_topics_partitions.sh URL TOPIC
set -euo pipefail
curl -s -i -H 'Accept: application/vnd.kafka.v2+json' "$1/topics/$2/partitions"
