"""bench/broker_profile.py: the shares read from `perf report` (sans-io), and one real
recording of a process that writes a file (skipped where perf is missing or not allowed)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from bench.broker_profile import (BrokerProfile, parse_report, perf_available, report_totals,
                                  summarize)

BY_SYMBOL = textwrap.dedent("""\
    # To display the perf.data header info, please use --header/--header-only options.
    #
    # Samples: 580  of event 'cpu-clock:pppH'
    # Event count (approx.): 1162324640
    #
    # Children      Self  Symbol
    # ........  ........  .......................................
    #
        45.17%     0.00%  [.] 0x00007fd888e56240
        30.69%    30.69%  [.] _PyEval_EvalFrameDefault
        16.21%     0.17%  [k] do_syscall_64
        41.00%     0.00%  [k] generic_perform_write
        36.50%     0.50%  [k] copy_folio_from_iter_atomic
        36.00%    36.00%  [k] rep_movs_alternative
         3.79%     0.00%  [k] tcp_sendmsg
         2.76%     0.00%  [k] tcp_recvmsg
         1.10%     0.00%  [k] do_sendfile
         9.50%     0.00%  [k] asm_exc_page_fault
    """)

BY_DSO = textwrap.dedent("""\
    # Samples: 580  of event 'cpu-clock:pppH'
    # Event count (approx.): 1162324640
    #
    # Overhead  Shared Object
    # ........  .......................................
    #
        52.07%  [kernel.kallsyms]
        41.14%  libpython3.11.so.1.0
         4.14%  libc.so.6
         0.69%  _crc32c.cpython-311-x86_64-linux-gnu.so
    """)


def test_rows_of_both_report_layouts():
    rows = parse_report(BY_SYMBOL)
    assert rows[1] == (30.69, 30.69, "_PyEval_EvalFrameDefault")
    assert (41.0, 0.0, "generic_perform_write") in rows
    assert parse_report(BY_DSO)[1] == (41.14, None, "libpython3.11.so.1.0")
    assert parse_report("# only comments\n#\n\n") == []


def test_shares_inclusive_where_a_path_is_meant_self_for_the_interpreter():
    s = summarize(BY_SYMBOL, BY_DSO)
    assert s["log_write_pct"] == 41.0              # everything under the buffered write
    assert s["page_copy_pct"] == 36.5              # the copy, with the helper below it
    assert s["socket_receive_pct"] == 2.76
    assert s["socket_send_pct"] == pytest.approx(4.89)   # tcp_sendmsg + sendfile
    assert s["page_fault_pct"] == 9.5
    assert s["python_pct"] == 41.14
    assert s["kernel_pct"] == 52.07
    assert s["top_self"][0] == ("rep_movs_alternative", 36.0)
    assert ("_PyEval_EvalFrameDefault", 30.69) in s["top_self"]


def test_the_header_totals_with_perf_s_abbreviations():
    assert report_totals(BY_DSO) == (580, 1.16232464)
    assert report_totals("# Samples: 2K of event 'cpu-clock:pppH'\n"
                         "# Event count (approx.): 4008016032\n") == (2000, 4.008016032)
    assert report_totals("") == (0, 0.0)


def test_missing_symbols_read_as_zero():
    s = summarize("", "")
    assert s["log_write_pct"] == s["page_copy_pct"] == s["python_pct"] == 0
    assert s["top_self"] == []


def test_a_recording_perf_cannot_report_gives_zeros_and_the_reason(tmp_path):
    if not perf_available():
        pytest.skip("perf is not installed")
    prof = BrokerProfile([1], tmp_path / "missing.perf.data")    # never recorded
    s = prof.summary()
    assert s["samples"] == 0 and s["log_write_pct"] == 0
    assert s["report_errors"] and (tmp_path / "missing.perf.txt").exists()


_WRITER = ("import os, time\n"
           "f = os.open(os.environ['OUT'], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
           "block = b'x' * 65536\n"
           "print('up', flush=True)\n"
           "end = time.monotonic() + 2.0\n"
           "while time.monotonic() < end:\n"
           "    os.write(f, block)\n"
           "    if os.lseek(f, 0, os.SEEK_CUR) > 64 << 20:\n"
           "        os.lseek(f, 0, os.SEEK_SET)\n")


def test_a_recording_of_a_process_writing_a_file(tmp_path):
    if not perf_available():
        pytest.skip("perf is not installed")
    child = subprocess.Popen([sys.executable, "-c", _WRITER], stdout=subprocess.PIPE,
                             env={"OUT": str(tmp_path / "out.bin")})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"up"
        try:
            with BrokerProfile([child.pid], tmp_path / "w.perf.data") as prof:
                child.wait(10)
        except RuntimeError as e:       # e.g. perf_event_paranoid forbids it here
            pytest.skip(str(e))
        s = prof.summary()
    finally:
        child.kill()
        child.wait()
    if s["samples"] == 0:
        pytest.skip("perf recorded no samples (not allowed to sample other processes?)")
    assert s["log_write_pct"] > 0                   # its writes went into the page cache
    assert s["kernel_pct"] > 0
    assert (tmp_path / "w.perf.txt").exists() and not (tmp_path / "w.perf.data").exists()
