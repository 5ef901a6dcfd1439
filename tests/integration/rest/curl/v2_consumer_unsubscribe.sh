#!/usr/bin/env bash
# DELETE /consumers/{group}/instances/{instance}/subscription: unsubscribe; 204.
# Usage: v2_consumer_unsubscribe.sh URL GROUP INSTANCE
set -euo pipefail
curl -s -i -X DELETE -H 'Accept: application/vnd.kafka.v2+json' \
    "$1/consumers/$2/instances/$3/subscription"
