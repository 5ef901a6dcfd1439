#!/usr/bin/env bash
# A partition's first and end offsets: v2_topics_partition_offsets.sh URL TOPIC PARTITION
set -euo pipefail
curl -s -i -H 'Accept: application/vnd.kafka.v2+json' "$1/topics/$2/partitions/$3/offsets"
