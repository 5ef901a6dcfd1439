#!/usr/bin/env bash
# POST /v3/clusters/{cluster_id}/topics/{topic_name}/records: produce a record; prints the status and its delivery report.
# Usage: v3_produce_records.sh PROXY_URL CLUSTER_ID TOPIC [JSON_BODY]  (default: a BINARY key, a JSON value,
# a header, partition 0 and a timestamp; a body of several records concatenated gets one report each)
set -euo pipefail
BODY=${4:-'{"partition_id":0,"headers":[{"name":"trace","value":"YWJjMTIz"}],"key":{"type":"BINARY","data":"a2V5LTE="},"value":{"type":"JSON","data":{"n":1,"s":"one"}},"timestamp":"2021-02-05T19:14:42.123Z"}'}
curl -s -i -X POST -H 'Content-Type: application/json' --data-binary "$BODY" "$1/v3/clusters/$2/topics/$3/records"
