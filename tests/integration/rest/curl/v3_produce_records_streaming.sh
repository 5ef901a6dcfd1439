#!/usr/bin/env bash
# POST /v3/clusters/{cluster_id}/topics/{topic_name}/records, streaming: records written one after another into one
# chunked request (here: COUNT STRING records to partition 0); one delivery report each, in order, as they are acknowledged.
# Usage: v3_produce_records_streaming.sh PROXY_URL CLUSTER_ID TOPIC [COUNT]
set -euo pipefail
for i in $(seq 1 "${4:-3}"); do
  printf '{"partition_id":0,"value":{"type":"STRING","data":"record %d"}}\n' "$i"
done | curl -s -i -X POST -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' \
  --data-binary @- "$1/v3/clusters/$2/topics/$3/records"
