"""The protocol codec alone (no sockets, no broker): microseconds to decode and encode the
messages of the hot path, Fetch and Produce requests and responses, at the versions the
clients here use.

    .venv/bin/python bench/codec.py                     # table
    .venv/bin/python bench/codec.py --json codec.json --partitions 16

A broker pays the request decode and the response encode for every Fetch and Produce it
serves, and a follower the other two for every fetch it sends.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine, print_table, write_json  # noqa: E402
from clients.protocol.messages import API_BY_NAME  # noqa: E402
from clients.protocol.types import Reader  # noqa: E402


def _time_us(fn: Callable[[], Any], seconds: float) -> float:
    fn()
    n = 0
    start = time.perf_counter()
    while True:
        for _ in range(200):
            fn()
        n += 200
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / n * 1e6


def cases(partitions: int) -> list[tuple[str, str, int, dict]]:
    fetch_req = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
                 "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                 "topics": [{"topic": "t", "partitions": [
                     {"partition": i, "current_leader_epoch": 3, "fetch_offset": 123456789,
                      "log_start_offset": -1, "partition_max_bytes": 1048576}
                     for i in range(partitions)]}],
                 "forgotten_topics_data": [], "rack_id": ""}
    fetch_resp = {"throttle_time_ms": 0, "error_code": 0, "session_id": 7, "responses": [
        {"topic": "t", "partitions": [
            {"partition_index": i, "error_code": 0, "high_watermark": 123456789,
             "last_stable_offset": 123456789, "log_start_offset": 0,
             "aborted_transactions": None, "preferred_read_replica": -1,
             "records": b"x" * 200} for i in range(partitions)]}]}
    produce_req = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "t", "partition_data": [{"index": i, "records": b"x" * 2000}
                                         for i in range(partitions)]}]}
    produce_resp = {"throttle_time_ms": 0, "responses": [{"name": "t", "partition_responses": [
        {"index": i, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1,
         "log_start_offset": 0, "record_errors": [], "error_message": None}
        for i in range(partitions)]}]}
    return [("Fetch", "request", v, fetch_req) for v in (11, 12)] + \
        [("Fetch", "response", v, fetch_resp) for v in (11, 12)] + \
        [("Produce", "request", v, produce_req) for v in (7, 9)] + \
        [("Produce", "response", v, produce_resp) for v in (7, 9)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=0.5, help="per measurement")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = []
    for name, which, version, body in cases(args.partitions):
        api = API_BY_NAME[name]
        if which == "request":
            data = api.encode_request(body, version).getvalue()
            decode = lambda: api.decode_request(Reader(data), version)  # noqa: E731
            encode = lambda: api.encode_request(body, version)          # noqa: E731
        else:
            data = api.encode_response(body, version).getvalue()
            decode = lambda: api.decode_response(Reader(data), version)  # noqa: E731
            encode = lambda: api.encode_response(body, version)          # noqa: E731
        rows.append({"message": f"{name} {which} v{version}", "partitions": args.partitions,
                     "bytes": len(data), "decode_us": _time_us(decode, args.seconds),
                     "encode_us": _time_us(encode, args.seconds)})
    print_table(["message", "partitions", "bytes", "decode us", "encode us"],
                [[r["message"], r["partitions"], r["bytes"], r["decode_us"], r["encode_us"]]
                 for r in rows])
    write_json(args.json, {"benchmark": "codec", "args": vars(args), "machine": machine(),
                           "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
