"""kafka-console-producer: one record per line of standard input.

    kafka-console-producer --bootstrap-server H:P --topic t [--property parse.key=true]
        [--property key.separator=:] [--property parse.headers=true] [--sync]
        [--compression-codec [gzip|snappy|lz4|zstd]] [--request-required-acks 1]
        [--producer-property k=v ...] [--producer.config FILE]

Line format (Kafka's LineMessageReader): `[headers<headers.delimiter>][key<key.separator>]value`
with headers `k1:v1,k2:v2`; a key or value equal to `null.marker` (when set) is sent as null.
A line without the expected separator is an error (exit 1) unless `ignore.error=true`, which
sends the whole line as the value. At EOF everything is flushed; exit 1 if any record failed.

Reading and sending are on the main thread; deliveries complete on the producer's I/O thread
(the failure list is guarded by a lock).
"""
from __future__ import annotations

import argparse
import sys
import threading
from typing import TYPE_CHECKING, Any, BinaryIO, Iterator, NamedTuple

from .common import (CliError, ToolParser, add_connection_args, client_config, command_timeout,
                     interrupt_on_sigterm, parse_assignment, run_tool, wait_reachable)

if TYPE_CHECKING:
    from clients.types import RecordMetadata

ERROR_PREFIX = "Error: "
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MAX_REPORTED_FAILURES = 10


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-console-producer",
                   description="Read lines from standard input and send each as a record.")
    add_connection_args(p, "--producer.config", "Producer config properties file (the "
                        "--producer-property values take precedence).")
    p.add_argument("--broker-list", help="DEPRECATED, use --bootstrap-server instead.")
    p.add_argument("--topic", required=True, help="REQUIRED: the topic to produce to.")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="Line reader properties: parse.key, key.separator, parse.headers, "
                        "headers.delimiter, headers.separator, headers.key.separator, "
                        "ignore.error, null.marker.")
    p.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="A producer config (repeatable).")
    p.add_argument("--compression-codec", nargs="?", const="gzip", choices=CODECS,
                   help="Compression codec; the flag alone means gzip.")
    p.add_argument("--request-required-acks", default=None,
                   help="acks: 0, 1, -1 or all (default all).")
    p.add_argument("--sync", action="store_true", help="Wait for each record's acknowledgement.")
    p.add_argument("--batch-size", type=int, help="batch.size: bytes per partition batch.")
    p.add_argument("--timeout", type=int, metavar="MS", help="linger.ms: how long a batch waits.")
    p.add_argument("--message-send-max-retries", type=int, help="retries.")
    p.add_argument("--retry-backoff-ms", type=int, help="retry.backoff.ms.")
    p.add_argument("--max-block-ms", type=int, help="max.block.ms.")
    p.add_argument("--max-memory-bytes", type=int, help="buffer.memory.")
    p.add_argument("--metadata-expiry-ms", type=int, help="metadata.max.age.ms.")
    return p


class ReaderOptions(NamedTuple):
    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    ignore_error: bool = False
    null_marker: bytes | None = None


def _bool(v: str) -> bool:
    return v.strip().lower() == "true"


def reader_options(properties: list[str]) -> ReaderOptions:
    """--property key=value settings of the line reader (unknown keys are ignored, as Kafka
    does)."""
    props = dict(parse_assignment(p, "--property") for p in properties)
    enc = lambda k, d: props[k].encode() if k in props else d  # noqa: E731
    opts = ReaderOptions(
        parse_key=_bool(props.get("parse.key", "false")),
        key_separator=enc("key.separator", b"\t"),
        parse_headers=_bool(props.get("parse.headers", "false")),
        headers_delimiter=enc("headers.delimiter", b"\t"),
        headers_separator=enc("headers.separator", b","),
        headers_key_separator=enc("headers.key.separator", b":"),
        ignore_error=_bool(props.get("ignore.error", "false")),
        null_marker=enc("null.marker", None))
    for name in ("key_separator", "headers_delimiter", "headers_separator", "headers_key_separator"):
        if not getattr(opts, name):
            raise CliError(f"{name.replace('_', '.')} must not be empty")
    if opts.null_marker == b"":
        raise CliError("null.marker must not be empty")
    return opts


class LineRecord(NamedTuple):
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def parse_line(line: bytes, number: int, opts: ReaderOptions) -> LineRecord:
    """One input line (without its line ending) -> key, value, headers."""
    text = line
    headers: list[tuple[str, bytes | None]] = []
    if opts.parse_headers:
        head, sep, rest = text.partition(opts.headers_delimiter)
        if not sep:
            if not opts.ignore_error:
                raise CliError(f"No headers delimiter found on line number {number}: "
                               f"'{_show(line)}'")
        else:
            text = rest
            if head != opts.null_marker and head:
                for pair in head.split(opts.headers_separator):
                    hk, hsep, hv = pair.partition(opts.headers_key_separator)
                    if not hsep:
                        raise CliError(f"No header key separator found in pair '{_show(pair)}' "
                                       f"on line number {number}")
                    headers.append((hk.decode("utf-8", "replace"),
                                    None if hv == opts.null_marker else hv))
    key: bytes | None = None
    if opts.parse_key:
        k, sep, v = text.partition(opts.key_separator)
        if sep:
            key, text = k, v
        elif not opts.ignore_error:
            raise CliError(f"No key separator found on line number {number}: '{_show(line)}'")
    if key is not None and key == opts.null_marker:
        key = None
    value: bytes | None = None if text == opts.null_marker else text
    return LineRecord(key, value, headers)


def _show(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def read_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines without their ending (\\n or \\r\\n), as Java's BufferedReader.readLine."""
    for raw in stream:
        if raw.endswith(b"\n"):
            raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
        yield raw


def producer_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Producer configs from --producer-property then the explicit tool flags."""
    cfg: dict[str, Any] = dict(parse_assignment(p, "--producer-property")
                               for p in args.producer_property)
    flags = {"acks": args.request_required_acks, "compression.type": args.compression_codec,
             "linger.ms": args.timeout, "retries": args.message_send_max_retries,
             "retry.backoff.ms": args.retry_backoff_ms, "max.block.ms": args.max_block_ms,
             "buffer.memory": args.max_memory_bytes, "metadata.max.age.ms": args.metadata_expiry_ms,
             "batch.size": args.batch_size}
    cfg.update({k: v for k, v in flags.items() if v is not None})
    return cfg


class _Failures:
    """Delivery failures, recorded from the producer's I/O thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.first: list[str] = []

    def callback(self, topic: str, key: bytes | None, value: bytes | None):
        def on_delivery(err: Exception | None, md: RecordMetadata | None) -> None:
            if err is None:
                return
            with self._lock:
                self.count += 1
                if len(self.first) < MAX_REPORTED_FAILURES:
                    self.first.append(f"Error when sending message to topic {topic} with key: "
                                      f"{_size(key)}, value: {_size(value)} with error: "
                                      f"{type(err).__name__}: {err}")
        return on_delivery


def _size(b: bytes | None) -> str:
    return "null" if b is None else f"{len(b)} bytes"


def run(args: argparse.Namespace, stdin: BinaryIO | None = None) -> int:
    from clients.producer import Producer

    stdin = stdin or sys.stdin.buffer
    if args.bootstrap_server is None:
        args.bootstrap_server = args.broker_list
    if not args.bootstrap_server:
        raise CliError("--bootstrap-server is required")
    opts = reader_options(args.property)
    cfg = client_config(args, "producer", producer_overrides(args),
                        defaults={"client.id": "console-producer"})
    wait_reachable(args.bootstrap_server, command_timeout(args))
    failures = _Failures()
    producer = Producer(cfg)
    interrupt_on_sigterm()
    try:
        for number, line in enumerate(read_lines(stdin), 1):
            rec = parse_line(line, number, opts)
            fut = producer.send(args.topic, rec.value, key=rec.key, headers=rec.headers or None,
                                on_delivery=failures.callback(args.topic, rec.key, rec.value))
            if args.sync:
                try:
                    fut.result()
                except Exception:  # noqa: BLE001 - reported by the delivery callback
                    pass
        producer.flush()
    finally:
        producer.close()
    for report in failures.first:
        print(report, file=sys.stderr)
    if failures.count:
        raise CliError(f"{failures.count} record(s) could not be sent to topic {args.topic}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
