#!/usr/bin/env bash
# One topic's configs and partitions: v2_topics_get.sh URL TOPIC
set -euo pipefail
curl -s -i -H 'Accept: application/vnd.kafka.v2+json' "$1/topics/$2"
