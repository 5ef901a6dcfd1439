#!/usr/bin/env bash
# Produce base64 records to a topic: v2_produce_binary.sh URL TOPIC BODY (BODY: JSON text, or @file)
set -euo pipefail
curl -s -i -X POST -H 'Content-Type: application/vnd.kafka.binary.v2+json' -H 'Accept: application/vnd.kafka.v2+json' --data-binary "$3" "$1/topics/$2"
