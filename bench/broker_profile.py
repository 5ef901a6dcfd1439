"""Where a broker's CPU went during one benchmark run: `perf record` samples of its
processes for the run, summarised from `perf report` into the shares that explain a
throughput figure on this VM (docs/PERFORMANCE.md, "Why 1 KiB produce stops near 330-400
MB/s here: new memory on this VM").

    with BrokerProfile(pids, folder / "run0.perf.data") as prof:
        ...                                    # the run
    summary = prof.summary()                   # shares, and the report's text

The shares are of the broker's CPU samples (cpu-clock, with call graphs), so they hold
whatever the machine's load:
- `log_write_pct`: inclusive, under `generic_perform_write` (the log's buffered writes:
  page-cache pages found or allocated, and the copy into them);
- `page_copy_pct`: inclusive, in the kernel's copy into page-cache pages (part of the
  above; the copy itself may be a helper such as `rep_movs_alternative` below it);
- `socket_receive_pct` / `socket_send_pct`: inclusive, under `tcp_recvmsg` / `tcp_sendmsg`
  (and `do_sendfile`);
- `page_fault_pct`: inclusive, in page-fault handling (`asm_exc_page_fault`): memory the
  process touches for the first time, which this VM makes expensive;
- `python_pct`: self, in the interpreter (libpython: bytecode, objects, the allocator);
- `kernel_pct`: self, in the kernel as a whole.
`parse_report` and `summarize` are sans-io (tests/unit/test_bench_broker_profile.py).
"""
from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

__all__ = ["BrokerProfile", "parse_report", "perf_available", "report_totals", "summarize"]

SAMPLE_HZ = 499     # low enough that sampling costs the broker ~1 %, enough for a 4 s run

# The kernel's copy into page-cache pages: its name moved between kernel versions.
_PAGE_COPY = ("copy_folio_from_iter_atomic", "copy_page_from_iter_atomic")

_LINE = re.compile(r"^\s*([\d.]+)%\s+(?:([\d.]+)%\s+)?(?:\[(.)\]\s+)?(.+?)\s*$")


def perf_available() -> bool:
    return shutil.which("perf") is not None


def parse_report(text: str) -> list[tuple[float, float | None, str]]:
    """The rows of `perf report --stdio -g none`: (first %, second % or None, name), for a
    report with children (Children, Self) or without (Overhead), sorted by symbol or dso."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if m:
            second = float(m.group(2)) if m.group(2) is not None else None
            rows.append((float(m.group(1)), second, m.group(4)))
    return rows


def report_totals(text: str) -> tuple[int, float]:
    """(samples, CPU seconds sampled) from a report's header: perf abbreviates the count
    ("# Samples: 2K of event 'cpu-clock'"); the event count of cpu-clock is nanoseconds."""
    m = re.search(r"^# Samples: ([\d.]+)([KMG]?)", text, re.M)
    samples = int(float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]) if m else 0
    m = re.search(r"^# Event count \(approx\.\): (\d+)", text, re.M)
    return samples, (int(m.group(1)) / 1e9 if m else 0.0)


def summarize(by_symbol: str, by_dso: str, top: int = 12) -> dict[str, Any]:
    """The shares (see the module docstring) from two reports of one recording:
    `by_symbol` with --children --sort sym, `by_dso` with --no-children --sort dso."""
    children: dict[str, float] = {}
    self_pct: dict[str, float] = {}
    for total, own, name in parse_report(by_symbol):
        children[name] = max(children.get(name, 0.0), total)
        self_pct[name] = self_pct.get(name, 0.0) + (own if own is not None else total)
    dsos: dict[str, float] = {}
    for pct, _, name in parse_report(by_dso):
        dsos[name] = dsos.get(name, 0.0) + pct

    def dso_share(prefix: str) -> float:
        return round(sum(v for k, v in dsos.items() if k.startswith(prefix)), 2)

    return {
        "log_write_pct": round(children.get("generic_perform_write", 0.0), 2),
        "page_copy_pct": round(max(children.get(s, 0.0) for s in _PAGE_COPY), 2),
        "socket_receive_pct": round(children.get("tcp_recvmsg", 0.0), 2),
        "socket_send_pct": round(children.get("tcp_sendmsg", 0.0)
                                 + children.get("do_sendfile", 0.0), 2),
        "page_fault_pct": round(children.get("asm_exc_page_fault", 0.0), 2),
        "python_pct": dso_share("libpython"),
        "kernel_pct": dso_share("[kernel"),
        "top_self": [(name, round(pct, 2)) for name, pct in
                     sorted(self_pct.items(), key=lambda kv: -kv[1])[:top] if pct > 0],
    }


class BrokerProfile:
    """`perf record` of `pids` from entering the block to leaving it; `summary()` after."""

    def __init__(self, pids: list[int], data_file: Path):
        self.pids = pids
        self.data_file = data_file
        self._proc: subprocess.Popen[bytes] | None = None
        self.errors: list[str] = []

    def __enter__(self) -> "BrokerProfile":
        self._proc = subprocess.Popen(
            ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(SAMPLE_HZ), "-g",
             "-p", ",".join(str(p) for p in self.pids), "-o", str(self.data_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.3)         # perf attaches before the run's clock starts
        if self._proc.poll() is not None:
            err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
            raise RuntimeError(f"perf record exited at once: {err.strip()}")
        return self

    def __exit__(self, *exc: Any) -> None:
        proc = self._proc
        if proc is None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _report(self, *args: str) -> str:
        """The report's text; empty, with the reason kept, when perf cannot make it (no
        samples, say): a run's throughput must not be lost to its profile."""
        r = subprocess.run(["perf", "report", "-i", str(self.data_file), "--stdio",
                            "-g", "none", *args], capture_output=True, text=True)
        if r.returncode != 0:
            self.errors.append(r.stderr.strip()[-300:])
            return ""
        return r.stdout

    def summary(self) -> dict[str, Any]:
        """The shares, the sample count, and the two reports' text (kept beside the run's
        results as `<data file>.txt`, the perf.data itself removed: it is large)."""
        by_symbol = self._report("--children", "--sort", "sym", "--percent-limit", "0.3")
        by_dso = self._report("--no-children", "--sort", "dso")
        out = summarize(by_symbol, by_dso)
        out["samples"], out["cpu_s"] = report_totals(by_dso)
        if self.errors:
            out["report_errors"] = self.errors
        text_file = self.data_file.with_suffix(".txt")
        text_file.write_text(by_dso + "\n" + by_symbol)
        out["report"] = text_file.name
        self.data_file.unlink(missing_ok=True)
        return out
