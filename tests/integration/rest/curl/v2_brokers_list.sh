#!/usr/bin/env bash
# The brokers' ids: v2_brokers_list.sh URL
set -euo pipefail
curl -s -i -H 'Accept: application/vnd.kafka.v2+json' "$1/brokers"
