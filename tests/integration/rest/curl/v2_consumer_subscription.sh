#!/usr/bin/env bash
# GET /consumers/{group}/instances/{instance}/subscription: {"topics": [...]}.
# Usage: v2_consumer_subscription.sh URL GROUP INSTANCE
set -euo pipefail
curl -s -i -H 'Accept: application/vnd.kafka.v2+json' "$1/consumers/$2/instances/$3/subscription"
