"""The record decoder and encoder compiled by mypyc (setup.py) are the ones in use where they
could be built, decode exactly as their Python source does, good records and bad alike, and
encode the same bytes; the build is set aside for the source when asked (STROM_PURE_PYTHON)
or when the source is newer than the build."""
from __future__ import annotations

import importlib.util
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from clients.protocol import native
from clients.protocol import records
from clients.protocol.batch_header import HEADER_SIZE, BatchHeader, pack_header, read_header
from clients.protocol.records import Record, build_batch
from clients.types import ConsumerRecord

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "clients" / "protocol" / "record_rows.py"
NOW = 1_700_000_000_000


def _buildable() -> str | None:
    """Why no compiled build is expected here, or None."""
    if os.environ.get(native.PURE_ENV, "") not in ("", "0"):
        return f"{native.PURE_ENV} is set"
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed"
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return "no C compiler"
    return None


compiled_only = pytest.mark.skipif(not native.is_compiled(records._rows),
                                   reason="record_rows is not compiled here")


def test_the_compiled_decoder_is_in_use_where_it_can_be_built():
    """pip install -e . (bin/_setup.sh) compiles it where mypyc and a C compiler are: a build
    that fell back to the source (mypyc refusing the module, say) fails here."""
    why = _buildable()
    if why is not None:
        pytest.skip(why)
    assert native.is_compiled(records._rows), (
        f"{records._rows.__file__}: not compiled; see the pip install log (bin/_setup.sh)")


def _source_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("clients.protocol._record_rows_source", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _decode(mod: ModuleType, data: bytes, h: BatchHeader, stop: int | None = None
            ) -> tuple[list, str | None]:
    out: list = []
    try:
        mod.decode_rows(data, h, 0, 0, h.records_count if stop is None else stop, -1, out,
                        ConsumerRecord, "t", 3)
    except Exception as e:          # noqa: BLE001 - compared, type and message
        return out, f"{type(e).__name__}: {e}"
    return out, None


def _corpus() -> list[bytes]:
    """Batches of every shape the decoder has a branch for."""
    rng = random.Random(7)
    values = [os.urandom(n) for n in (0, 1, 100, 127, 128, 1024, 20000)]
    headers = [("h", b"1"), ("", None), ("\u00e9" * 70, b"x" * 300)]
    batches = [
        build_batch([Record(None, v) for v in values], now_ms=NOW),
        build_batch([Record(b"key-%d" % i, values[i % 7],
                            timestamp=NOW + rng.randrange(-10**6, 10**9)) for i in range(300)],
                    now_ms=NOW),
        build_batch([Record(None, None), Record(b"", b""), Record(b"k" * 200, None)],
                    now_ms=NOW),
        build_batch([Record(b"k", b"v", headers=headers) for _ in range(20)], now_ms=NOW),
        build_batch([Record(None, b"x" * 100) for _ in range(1000)], now_ms=NOW, base_offset=5000),
    ]
    return batches


def _section(buf: bytes) -> tuple[bytes, BatchHeader]:
    return bytes(buf[HEADER_SIZE:]), read_header(buf)


@compiled_only
def test_compiled_and_source_decode_good_batches_alike():
    source = _source_module()
    for buf in _corpus():
        data, h = _section(buf)
        got, err = _decode(records._rows, data, h)
        want, want_err = _decode(source, data, h)
        assert err is None and want_err is None
        assert got == want and len(got) == h.records_count
        # a poll's worth at a time: stop in the middle, go on from there
        half = h.records_count // 2
        first, _ = _decode(records._rows, data, h, half)
        assert first == want[:half]


@compiled_only
def test_compiled_and_source_decode_log_append_time_and_gaps_alike():
    source = _source_module()
    buf = build_batch([Record(None, b"v%d" % i) for i in range(10)], now_ms=NOW)
    h = read_header(buf)._replace(attributes=0x08, max_timestamp=NOW + 5)
    data = bytes(buf[HEADER_SIZE:])
    assert _decode(records._rows, data, h) == _decode(source, data, h)
    # offset deltas checked as a compacted batch's (holes allowed): last delta past the count
    h = read_header(buf)._replace(last_offset_delta=30)
    assert _decode(records._rows, data, h) == _decode(source, data, h)


@compiled_only
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compiled_and_source_fail_alike_on_damaged_sections(seed):
    """1-3 random bytes changed, sometimes the end cut off: the same rows before the same
    error (type and message), or the same rows."""
    source = _source_module()
    rng = random.Random(seed)
    bases = [_section(b) for b in _corpus()[:4]]
    failures = 0
    for _ in range(1500):
        data, h = bases[rng.randrange(len(bases))]
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(mutated))] = rng.getrandbits(8)
        if rng.random() < 0.2:
            del mutated[rng.randrange(len(mutated)):]
        got = _decode(records._rows, bytes(mutated), h)
        want = _decode(source, bytes(mutated), h)
        assert got == want
        failures += want[1] is not None
    assert failures > 300          # the error paths were compared too, not only clean reads


def _encoded(mod: ModuleType, rows: list[tuple]) -> bytes:
    out = bytearray()
    for offset_delta, ts_delta, key, value, headers in rows:
        mod.encode_row(out, offset_delta, ts_delta, key, value, mod.encode_headers(headers))
    return bytes(out)


@compiled_only
def test_compiled_and_source_encode_alike():
    """Every branch of the encoder: null, empty and long keys and values (lengths past the
    varint table), timestamp deltas either side of the base and past 32 bits, offset
    deltas past the table, headers with null values and bytes keys."""
    source = _source_module()
    rng = random.Random(11)
    sizes = [0, 1, 63, 64, 100, 8191, 8192, 20000]
    rows = []
    for i in range(400):
        key = None if i % 3 == 0 else os.urandom(rng.choice(sizes))
        value = None if i % 7 == 0 else os.urandom(rng.choice(sizes))
        ts_delta = rng.choice([0, 1, -1, 5000, -(2**40), 2**40, 2**62, rng.randrange(-10**9, 10**9)])
        offset_delta = rng.choice([i, 8191 + i, 2**20 + i])
        headers = [] if i % 2 else [("h", b"1"), ("", None), (b"raw", b"x" * rng.choice(sizes))]
        rows.append((offset_delta, ts_delta, key, value, headers))
    got = _encoded(records._rows, rows)
    assert got == _encoded(source, rows) and len(got) > 1_000_000


@compiled_only
def test_the_compiled_encoder_takes_bytes_only():
    """The producer hands it bytes (a serializer's bytearray is made bytes at send());
    anything else is a TypeError, never a record encoded from the wrong object."""
    for bad in (bytearray(b"v"), memoryview(b"v"), "v"):
        with pytest.raises(TypeError):
            records._rows.encode_row(bytearray(), 0, 0, None, bad, b"\x00")


def _run(code: str, env: dict[str, str], root: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=root, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60)


_WHICH = ("import clients.protocol.records as r, clients.protocol.native as n; "
          "print('compiled' if n.is_compiled(r._rows) else 'source')")


@compiled_only
def test_strom_pure_python_imports_the_source():
    assert _run(_WHICH, {native.PURE_ENV: "1"}).stdout.strip() == "source"
    assert _run(_WHICH, {native.PURE_ENV: "0"}).stdout.strip() == "compiled"


@compiled_only
def test_a_source_newer_than_its_build_is_imported_instead(tmp_path):
    """An edit since the last build must not be hidden by the stale build."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "clients", copy / "clients",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(copy), native.PURE_ENV: ""}
    assert _run(_WHICH, env, copy).stdout.strip() == "compiled"
    edited = copy / "clients" / "protocol" / "record_rows.py"
    later = time.time() + 5
    os.utime(edited, (later, later))
    r = _run(_WHICH, env, copy)
    assert r.stdout.strip() == "source"
    assert "newer than its compiled build" in r.stderr
