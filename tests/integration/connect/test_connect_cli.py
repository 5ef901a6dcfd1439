"""bin/connect-standalone.sh and bin/connect-distributed.sh as a user meets them: --help,
and a bad worker config is one line naming the file and the key, exit code 1, no traceback."""
from __future__ import annotations

import subprocess

import pytest

from tests.support.broker_process import REPO


def run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / "bin" / script), *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO)


@pytest.mark.parametrize("mode", ["standalone", "distributed"])
def test_help(mode):
    r = run(f"connect-{mode}.sh", "--help")
    assert r.returncode == 0 and f"connect-{mode}.sh" in r.stdout


@pytest.mark.parametrize("mode, lines, key", [
    ("distributed", "group.id=g\noffset.storage.topic=o\nconfig.storage.topic=c\n"
                    "status.storage.topic=s\noffset.flush.interval.ms=soon\n", "offset.flush.interval.ms"),
    ("distributed", "offset.storage.topic=o\nconfig.storage.topic=c\nstatus.storage.topic=s\n", "group.id"),
    ("distributed", "group.id=g\noffset.storage.topic=o\nconfig.storage.topic=c\n"
                    "status.storage.topic=s\nexactly.once.source.support=sometimes\n",
     "exactly.once.source.support"),
    ("standalone", "bootstrap.servers=127.0.0.1:9092\n", "offset.storage.file.filename"),
])
def test_bad_worker_config_is_one_line_naming_file_and_key(tmp_path, mode, lines, key):
    path = tmp_path / "worker.properties"
    path.write_text(lines)
    r = run(f"connect-{mode}.sh", str(path))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, r.stderr
    assert str(path) in errors[0] and key in errors[0], errors[0]


def test_missing_worker_config_file(tmp_path):
    r = run("connect-standalone.sh", str(tmp_path / "nope.properties"))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "nope.properties" in r.stderr
