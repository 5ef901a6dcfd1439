"""kafka-console-consumer: print records to standard output, one per line.

    kafka-console-consumer --bootstrap-server H:P (--topic t | --include REGEX)
        [--from-beginning] [--group g] [--partition N [--offset earliest|latest|N]]
        [--max-messages N] [--timeout-ms MS] [--isolation-level read_committed]
        [--property print.key=true --property key.separator=: ...]
        [--consumer-property k=v ...] [--consumer.config FILE] [--skip-message-on-error]

Each record is printed as Kafka's DefaultMessageFormatter does: the enabled fields in the
order timestamp (`CreateTime:1700000000000`), `Partition:0`, `Offset:5`, headers (`h1:v1,h2:v2`
or `NO_HEADERS`), key, value - separated by key.separator (tab) and ended by line.separator
(newline); a null key, value or header value prints as `null`. At exit (max messages reached,
--timeout-ms without a record, Ctrl-C) "Processed a total of N messages" goes to stderr.

Without --group a throw-away group `console-consumer-NNNNN` is used, without auto-commit, as
Kafka does; with --partition the partition is assigned directly (no group membership).
Single-threaded: poll, format, write.
"""
from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, NamedTuple

from .common import (CliError, ToolParser, add_connection_args, client_config, command_timeout,
                     interrupt_on_sigterm, parse_assignment, run_tool, wait_reachable)

if TYPE_CHECKING:
    from clients.consumer import Consumer
    from clients.types import ConsumerRecord

ERROR_PREFIX = "Error: "
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def build_parser() -> ToolParser:
    p = ToolParser(prog="kafka-console-consumer", description="Print records to standard output.")
    add_connection_args(p, "--consumer.config", "Consumer config properties file (the "
                        "--consumer-property values take precedence).")
    p.add_argument("--topic", help="The topic to consume.")
    p.add_argument("--include", "--whitelist", dest="include", metavar="REGEX",
                   help="Consume every topic whose name matches this regular expression.")
    p.add_argument("--partition", type=int, help="Consume only this partition (no group membership).")
    p.add_argument("--offset", help="With --partition: earliest, latest or an offset (default latest).")
    p.add_argument("--from-beginning", action="store_true",
                   help="Start at the earliest offset when the group has no committed offset.")
    p.add_argument("--group", help="The consumer group id.")
    p.add_argument("--max-messages", type=int, help="Exit after this many records.")
    p.add_argument("--timeout-ms", type=int, help="Exit when no record arrives for this long.")
    p.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                   help="Formatter properties: print.timestamp, print.key, print.offset, "
                        "print.partition, print.headers, print.value, key.separator, "
                        "line.separator, headers.separator, headers.key.separator, null.literal, "
                        "key.deserializer, value.deserializer.")
    p.add_argument("--consumer-property", action="append", default=[], metavar="KEY=VALUE",
                   help="A consumer config (repeatable).")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   help="read_committed hides records of aborted transactions.")
    p.add_argument("--skip-message-on-error", action="store_true",
                   help="Skip a record that cannot be formatted instead of exiting.")
    return p


# ------------------------------------------------------------------ formatting

def _number_decoder(fmt: str) -> Callable[[bytes], bytes]:
    def decode(b: bytes) -> bytes:
        return str(struct.unpack(fmt, b)[0]).encode()
    return decode


# Kafka's deserializer class names (by simple name) -> bytes-to-printable-bytes.
DECODERS: dict[str, Callable[[bytes], bytes]] = {
    "StringDeserializer": lambda b: b, "ByteArrayDeserializer": lambda b: b,
    "BytesDeserializer": lambda b: b, "ByteBufferDeserializer": lambda b: b,
    "IntegerDeserializer": _number_decoder(">i"), "LongDeserializer": _number_decoder(">q"),
    "ShortDeserializer": _number_decoder(">h"), "DoubleDeserializer": _number_decoder(">d"),
    "FloatDeserializer": _number_decoder(">f"),
    "UUIDDeserializer": lambda b: str(uuid.UUID(b.decode())).encode(),
}


def _decoder(name: str | None) -> Callable[[bytes], bytes] | None:
    if not name:
        return None
    simple = name.rsplit(".", 1)[-1]
    if simple not in DECODERS:
        raise CliError(f"unsupported deserializer {name} (one of: {', '.join(sorted(DECODERS))})")
    return DECODERS[simple]


class FormatOptions(NamedTuple):
    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_literal: bytes = b"null"
    key_decoder: Callable[[bytes], bytes] | None = None
    value_decoder: Callable[[bytes], bytes] | None = None


def _unescape(s: str) -> bytes:
    # --property line.separator=\n on a shell command line arrives as backslash + n.
    return s.encode().decode("unicode_escape").encode("latin-1") if "\\" in s else s.encode()


def format_options(properties: list[str]) -> FormatOptions:
    """The formatter settings from --property key=value (unknown keys ignored, as Kafka)."""
    props = dict(parse_assignment(p, "--property") for p in properties)

    def flag(name: str, default: bool) -> bool:
        return props[name].strip().lower() == "true" if name in props else default

    def sep(name: str, default: bytes) -> bytes:
        return _unescape(props[name]) if name in props else default

    return FormatOptions(
        print_timestamp=flag("print.timestamp", False), print_partition=flag("print.partition", False),
        print_offset=flag("print.offset", False), print_headers=flag("print.headers", False),
        print_key=flag("print.key", False), print_value=flag("print.value", True),
        key_separator=sep("key.separator", b"\t"), line_separator=sep("line.separator", b"\n"),
        headers_separator=sep("headers.separator", b","),
        headers_key_separator=sep("headers.key.separator", b":"),
        null_literal=sep("null.literal", b"null"),
        key_decoder=_decoder(props.get("key.deserializer")),
        value_decoder=_decoder(props.get("value.deserializer")))


def _bytes(v: Any, opts: FormatOptions, decoder: Callable[[bytes], bytes] | None = None) -> bytes:
    if v is None:
        return opts.null_literal
    if isinstance(v, (bytes, bytearray, memoryview)):
        return decoder(bytes(v)) if decoder is not None else bytes(v)
    if isinstance(v, str):
        return v.encode()
    return str(v).encode()


def format_record(rec: ConsumerRecord, opts: FormatOptions) -> bytes:
    """One record as Kafka's DefaultMessageFormatter prints it (line separator included)."""
    fields: list[bytes] = []
    if opts.print_timestamp:
        kind = TIMESTAMP_TYPES.get(rec.timestamp_type)
        fields.append(f"{kind}:{rec.timestamp}".encode() if kind and rec.timestamp >= 0
                      else b"NO_TIMESTAMP")
    if opts.print_partition:
        fields.append(b"Partition:%d" % rec.partition)
    if opts.print_offset:
        fields.append(b"Offset:%d" % rec.offset)
    if opts.print_headers:
        headers = list(rec.headers or ())
        fields.append(opts.headers_separator.join(
            k.encode() + opts.headers_key_separator + _bytes(v, opts) for k, v in headers)
            if headers else b"NO_HEADERS")
    if opts.print_key:
        fields.append(_bytes(rec.key, opts, opts.key_decoder))
    if opts.print_value:
        fields.append(_bytes(rec.value, opts, opts.value_decoder))
    return opts.key_separator.join(fields) + opts.line_separator


# ------------------------------------------------------------------ consuming

def parse_offset(text: str | None) -> str | int | None:
    if text is None:
        return None
    t = text.strip().lower()
    if t in ("earliest", "latest"):
        return t
    try:
        n = int(t)
    except ValueError:
        raise CliError(f"The provided offset value '{text}' is incorrect. Valid values are "
                       f"'earliest', 'latest', or a non-negative long.") from None
    if n < 0:
        raise CliError(f"The provided offset value '{text}' is incorrect. Valid values are "
                       f"'earliest', 'latest', or a non-negative long.")
    return n


def check_args(args: argparse.Namespace) -> None:
    if bool(args.topic) == bool(args.include):
        raise CliError("Exactly one of --include/--topic is required.")
    if args.partition is not None and not args.topic:
        raise CliError("The topic is required when partition is specified.")
    if args.offset is not None and args.partition is None:
        raise CliError("The partition is required when offset is specified.")
    if args.offset is not None and args.from_beginning:
        raise CliError("Options from-beginning and offset cannot be specified together.")
    if args.max_messages is not None and args.max_messages < 0:
        raise CliError("--max-messages must not be negative")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise CliError("--timeout-ms must not be negative")


def consumer_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """Consumer configs: --consumer-property, then group / offset reset / isolation flags.
    (The --consumer.config file is read under these by client_config.)"""
    cfg: dict[str, Any] = dict(parse_assignment(p, "--consumer-property")
                               for p in args.consumer_property)
    if args.group:
        if cfg.get("group.id", args.group) != args.group:
            raise CliError("The group ids provided in different places (directly using "
                           "'--group', via '--consumer-property') do not match.")
        cfg["group.id"] = args.group
    if args.from_beginning:
        cfg["auto.offset.reset"] = "earliest"
    if args.isolation_level:
        cfg["isolation.level"] = args.isolation_level
    return cfg


def _final_config(args: argparse.Namespace) -> dict[str, Any]:
    cfg = client_config(args, "consumer", consumer_overrides(args),
                        defaults={"client.id": "console-consumer"})
    if args.group and cfg.get("group.id") != args.group:
        raise CliError("The group ids provided in different places (directly using '--group', "
                       "via '--consumer.config') do not match.")
    if not cfg.get("group.id") and args.partition is None:
        # A throw-away group, never committed to (Kafka's rule).
        cfg["group.id"] = f"console-consumer-{random.randint(1, 99999)}"
        cfg.setdefault("enable.auto.commit", "false")
    return cfg


def _start(consumer: Consumer, args: argparse.Namespace) -> None:
    from clients.types import TopicPartition

    if args.partition is None:
        if args.include:
            consumer.subscribe(pattern=args.include)
        else:
            consumer.subscribe([args.topic])
        return
    # topics() is one Metadata request; partitions_for() would wait for a missing topic.
    if args.topic not in set(consumer.topics()):
        raise CliError(f"Topic '{args.topic}' does not exist.")
    parts = consumer.partitions_for(args.topic)
    if args.partition not in set(parts):
        raise CliError(f"Partition {args.topic}-{args.partition} does not exist.")
    tp = TopicPartition(args.topic, args.partition)
    consumer.assign([tp])
    offset = parse_offset(args.offset)
    if offset is None:
        offset = "earliest" if args.from_beginning else "latest"
    if offset == "earliest":
        consumer.seek_to_beginning(tp)
    elif offset == "latest":
        consumer.seek_to_end(tp)
    elif isinstance(offset, int):                # parse_offset gives no other string
        consumer.seek(tp, offset)


class Progress:
    """Records handled so far (read after an interruption, for the exit line)."""

    count = 0


def consume(consumer: Consumer, opts: FormatOptions, out: BinaryIO, max_messages: int | None,
            timeout_ms: int | None, skip_on_error: bool, progress: Progress | None = None) -> int:
    """Poll and print until max_messages or timeout_ms without a record; returns the count."""
    progress = progress or Progress()
    count = 0
    idle = None if timeout_ms is None else timeout_ms / 1000.0
    last = time.monotonic()
    while max_messages is None or count < max_messages:
        wait = 1.0
        if idle is not None:
            left = last + idle - time.monotonic()
            if left <= 0:
                break
            wait = min(wait, left)
        want = None if max_messages is None else max_messages - count
        records = consumer.poll(timeout=wait, max_records=want)
        if not records:
            continue
        last = time.monotonic()
        chunks = []
        for rec in records:
            try:
                chunks.append(format_record(rec, opts))
            except Exception as e:  # noqa: BLE001 - a deserializer's failure on bad bytes
                if not skip_on_error:
                    raise CliError(f"cannot format record {rec.topic}-{rec.partition}@"
                                   f"{rec.offset}: {e}") from None
                print(f"Skipping record {rec.topic}-{rec.partition}@{rec.offset}: {e}",
                      file=sys.stderr)
            count += 1
        out.write(b"".join(chunks))
        out.flush()
        progress.count = count
    return count


def run(args: argparse.Namespace, out: BinaryIO | None = None) -> int:
    from clients.consumer import Consumer

    out = out or sys.stdout.buffer
    check_args(args)
    opts = format_options(args.property)
    parse_offset(args.offset)
    cfg = _final_config(args)
    wait_reachable(args.bootstrap_server, command_timeout(args))
    consumer = Consumer(config=cfg)
    interrupt_on_sigterm()
    try:
        _start(consumer, args)
        progress = Progress()
        try:
            consume(consumer, opts, out, args.max_messages, args.timeout_ms,
                    args.skip_message_on_error, progress)
        except KeyboardInterrupt:
            pass
        finally:
            print(f"Processed a total of {progress.count} messages", file=sys.stderr)
    finally:
        try:
            consumer.close()
        except Exception as e:  # noqa: BLE001 - the records are printed; say why close failed
            print(f"{ERROR_PREFIX}closing the consumer failed: {e}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_tool(lambda: run(args), ERROR_PREFIX)


if __name__ == "__main__":
    sys.exit(main())
