#!/usr/bin/env bash
# One partition: v2_topics_partition.sh URL TOPIC PARTITION
set -euo pipefail
curl -s -i -H 'Accept: application/vnd.kafka.v2+json' "$1/topics/$2/partitions/$3"
