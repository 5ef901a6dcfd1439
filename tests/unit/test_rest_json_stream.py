"""The incremental reader of v3 produce's concatenated-JSON body (clients/rest/json_stream.py):
a large value arriving in many chunks is parsed about once, not once per chunk, wherever the
chunks split its strings and escapes; text that Python's json reads but JSON (and Jackson)
does not — NaN, Infinity — and text too deep or too long for Python's json to read end the
body with an error, never an exception out of the reader."""
from __future__ import annotations

import json
import random
from bisect import bisect_left
from itertools import accumulate
import tracemalloc
from typing import Any

import pytest

import clients.rest.json_stream as js
from clients.rest.json_stream import JsonStreamReader


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of characters each call of the parser was given to parse."""
    sizes: list[int] = []
    real = js._raw_decode

    def counting(text: str, pos: int) -> tuple[Any, int]:
        sizes.append(len(text) - pos)
        return real(text, pos)
    monkeypatch.setattr(js, "_raw_decode", counting)
    return sizes


def feed_all(reader: JsonStreamReader, chunks: list[bytes]) -> list[tuple[int, Any]]:
    """(index of the chunk whose feed returned it, value) of each value, then finish()'s as -1."""
    out = [(i, v) for i, c in enumerate(chunks) for v in reader.feed(c)]
    return out + [(-1, v) for v in reader.finish()]


def test_a_large_json_value_in_many_chunks_is_parsed_about_once(parsed: list[int]) -> None:
    # JSON data full of the characters that may end a value (} ] "): every chunk holds
    # them, and each used to make the reader parse all the text pending again (quadratic:
    # a 12 MB record in 64 KiB chunks took 14.6 s of CPU).
    item = {"k": 'v"q}', "n": [1, 2, {"x": "]}\\"}], "s": "é\\\\"}
    record = {"value": {"type": "JSON", "data": [item] * 64_000}}
    body = json.dumps(record).encode() + b' {"after": 1}'
    assert len(body) > 4_000_000
    chunks = [body[i:i + 65536] for i in range(0, len(body), 65536)]
    reader = JsonStreamReader(64 * 1024 * 1024)
    out = feed_all(reader, chunks)
    assert reader.error is None
    assert [v for _, v in out] == [record, {"after": 1}]
    assert out[0][0] == len(chunks) - 1         # found as soon as its end arrived
    assert sum(parsed) < 3 * len(body), (len(parsed), sum(parsed))


# The text of JSON strings (escapes written out) that end near a chunk's edge.
TRICKY = [r'\"', r"\\", r"\\\\", r'\\\"', r'\"}', "]", "}", "{[", r"\u005c", r"\u0022", "é", "\U0001f600",
          "x", r'\\\\\"', r"\\\\\\"]


def _large_tricky_value(n: int) -> tuple[str, Any]:
    """JSON text long enough to be scanned, not parsed again, ending in strings of escapes,
    quotes and brackets, and the value it stands for."""
    tail = ",".join('"%s"' % t for t in TRICKY)
    text = '{"pad": "%s", "deep": [[{"a": [%s]}], {}], "end": "\\\\\\"}"}' % ("p" * n, tail)
    return text, json.loads(text)


@pytest.mark.parametrize("step", [1, 2, 3, 5, 7, 11])
def test_the_end_of_a_large_value_is_found_wherever_chunks_split_it(step: int, parsed: list[int]) -> None:
    text, value = _large_tricky_value(20_000)
    data = (text + ' "top \\" level" ' + text + "[1]").encode()
    head = 12_000           # one large chunk, then small ones: the value's end is found by scanning
    chunks = [data[:head]] + [data[i:i + step] for i in range(head, len(data), step)]
    reader = JsonStreamReader(1_000_000)
    out = feed_all(reader, chunks)
    assert reader.error is None
    assert [v for _, v in out] == [value, 'top " level', value, [1]]
    size = len(text.encode())
    ends = [size, size + 15, 2 * size + 16, len(data)]        # the byte after each value
    assert [i for i, _ in out] == [(e - 1 - head) // step + 1 for e in ends]
    # 1 to 11 bytes a chunk, thousands of chunks: each value is parsed again only while
    # it is short (the text pending is parsed again when it is at most a few times the
    # new text), then once its end has come.
    assert sum(parsed) < 8 * len(data), (len(parsed), sum(parsed))


@pytest.mark.parametrize("split", range(1, 40))
def test_a_split_anywhere_in_the_last_characters(split: int) -> None:
    text, value = _large_tricky_value(10_000)
    data = text.encode() + b" 7 "
    cut = len(data) - split
    reader = JsonStreamReader(1_000_000)
    out = feed_all(reader, [data[:5000], data[5000:cut], data[cut:]])
    assert [v for _, v in out] == [value, 7] and reader.error is None


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth > 4 or pick < 0.35:
        return rng.choice([None, True, False, rng.randint(-10**6, 10**6), rng.random(),
                           "".join(rng.choice('ab"\\/[]{}é\u2028\U0001f600 \n') for _ in range(rng.randint(0, 12)))])
    if pick < 0.7:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    return {"".join(rng.choice('k"\\}]') for _ in range(rng.randint(0, 4))): _random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 5))}


@pytest.mark.parametrize("seed", range(40))
def test_random_values_in_random_chunks(seed: int) -> None:
    """Objects, arrays and strings at the top level (a number there waits for the character
    after it), some long enough to be scanned: each comes out of the feed that brought its
    last byte."""
    rng = random.Random(seed)
    body, ends, values = b"", [], []
    for _ in range(12):
        value = [_random_value(rng), "p" * rng.choice([0, 10, 600, 3000])]
        value = rng.choice([value, {"v": value}, json.dumps(value)])
        body += rng.choice([b"", b" ", b"\n\t "]) + json.dumps(value, ensure_ascii=rng.random() < 0.5).encode()
        ends.append(len(body))
        values.append(value)
    cuts = sorted({0, len(body)} | {rng.randrange(len(body)) for _ in range(rng.randint(1, 3))})
    sizes = [rng.choice([1, 2, 3, 7, 64, 1000]) for _ in range(len(cuts))]
    chunks = []
    for (a, b), size in zip(zip(cuts, cuts[1:]), sizes):
        chunks += [body[i:min(i + size, b)] for i in range(a, b, size)] if rng.random() < 0.7 else [body[a:b]]
    reader = JsonStreamReader(1_000_000)
    out = feed_all(reader, chunks)
    assert reader.error is None
    assert [v for _, v in out] == values
    starts = list(accumulate((len(c) for c in chunks), initial=0))     # of each chunk
    assert [i for i, _ in out] == [bisect_left(starts, e) - 1 for e in ends]


def test_a_large_number_in_many_chunks(parsed: list[int]) -> None:
    number = "1.25" + "0" * 100_000
    data = ("[" + number + "] " + number + " ").encode()
    reader = JsonStreamReader(1_000_000)
    out = feed_all(reader, [data[i:i + 1000] for i in range(0, len(data), 1000)])
    assert [v for _, v in out] == [[1.25], 1.25] and reader.error is None
    assert sum(parsed) < 4 * len(data), (len(parsed), sum(parsed))


def test_a_value_two_bytes_at_a_time_costs_the_memory_of_its_text() -> None:
    # Not a str object (and a list slot) per piece: ~60 bytes for 2 bytes of text.
    data = b'{"v": "' + b"ab" * 150_000 + b'"}'
    reader = JsonStreamReader(1_000_000)
    tracemalloc.start()
    try:
        out = [v for i in range(0, len(data), 2) for v in reader.feed(data[i:i + 2])]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out == [{"v": "ab" * 150_000}]
    assert peak < 6 * len(data), peak


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_not_json(token: str) -> None:
    reader = JsonStreamReader(1000)
    assert reader.feed(f'{{"a": 1}} {{"timestamp": {token}}} {{"b": 2}}'.encode()) == [{"a": 1}]
    assert str(reader.error) == f"Non-standard token '{token}' in the value at character 9"
    assert reader.feed(b"{}") == [] and reader.finish() == []


def test_nan_split_across_chunks_is_not_json() -> None:
    reader = JsonStreamReader(1000)
    assert reader.feed(b'{"a": 1} [Na') == [{"a": 1}] and reader.error is None
    assert reader.feed(b"N]") == []
    assert str(reader.error) == "Non-standard token 'NaN' in the value at character 9"


@pytest.mark.parametrize("chunk", [None, 1000])
def test_nesting_too_deep_for_python_is_an_error(chunk: int | None) -> None:
    data = b'{"a": 1} ' + b"[" * 100_000 + b"]" * 100_000 + b' {"b": 2}'
    chunks = [data] if chunk is None else [data[i:i + chunk] for i in range(0, len(data), chunk)]
    reader = JsonStreamReader(1_000_000)
    out = feed_all(reader, chunks)
    assert [v for _, v in out] == [{"a": 1}]
    assert str(reader.error) == "the JSON text is nested too deeply at character 9"


def test_an_integer_too_long_for_python_is_an_error() -> None:
    reader = JsonStreamReader(1_000_000)
    assert reader.feed(b'{"a": 1} {"t": ' + b"9" * 5000 + b"}") == [{"a": 1}]
    assert str(reader.error).startswith("Exceeds the limit (4300 digits) for integer string "
                                        "conversion")
    assert str(reader.error).endswith(" in the value at character 9")
