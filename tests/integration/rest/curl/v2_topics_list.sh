#!/usr/bin/env bash
# List the topics: v2_topics_list.sh URL
set -euo pipefail
curl -s -i -H 'Accept: application/vnd.kafka.v2+json' "$1/topics"
