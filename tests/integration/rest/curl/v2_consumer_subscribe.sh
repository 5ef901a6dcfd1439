#!/usr/bin/env bash
# POST /consumers/{group}/instances/{instance}/subscription: subscribe to a list of topics
# ({"topics": [...]}) or a regular expression ({"topic_pattern": "..."}); 204.
# Usage: v2_consumer_subscribe.sh URL GROUP INSTANCE [BODY]
set -euo pipefail
BODY=${4:-'{"topics": ["test"]}'}
curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.v2+json' --data "$BODY" \
    "$1/consumers/$2/instances/$3/subscription"
