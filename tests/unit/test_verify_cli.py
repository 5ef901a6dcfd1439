"""strom-verify's command line without a cluster: usage errors are one line and exit 2, a
cluster that cannot be reached is "could not run" (exit 3, distinct from a found loss, exit
1), also as JSON, and --list-faults describes the registered kinds."""
from __future__ import annotations

import json
import socket

import pytest

from broker.testing.verify.cli import main
from broker.testing.verify.summary import COULD_NOT_RUN


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("argv, message", [
    ([], "required: --bootstrap-server"),
    (["--bootstrap-server", "h:1", "--faults", "kill9"], "--faults needs --cluster-dir"),
    (["--bootstrap-server", "h:1", "--faults", "kill9,flood", "--cluster-dir", "."],
     "unknown fault kind(s): flood"),
    (["--bootstrap-server", "h:1", "--acks", "1", "--idempotence"], "--idempotence needs --acks all"),
    (["--bootstrap-server", "h:1", "--acks", "0"], "invalid choice: '0'"),
    (["--bootstrap-server", "h:1", "--rate", "0"], "must be positive"),
    (["--bootstrap-server", "h:1", "--topic-config", "novalue"], "expected KEY=VALUE"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_an_unreachable_cluster_could_not_run(capsys):
    assert main(["--bootstrap-server", closed_port(), "--duration", "1",
                 "--command-timeout", "2"]) == COULD_NOT_RUN
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.startswith("strom-verify: could not run: Connection to node -1")


def test_could_not_run_as_json(capsys):
    code = main(["--bootstrap-server", closed_port(), "--json", "--command-timeout", "2"])
    doc = json.loads(capsys.readouterr().out)
    assert code == COULD_NOT_RUN == doc["exit_code"]
    assert doc["result"].startswith("COULD NOT RUN: Connection to node -1")


def test_a_cluster_dir_without_pid_files_could_not_run(capsys, tmp_path):
    # something accepts connections (all the reachability check asks), but the faults have
    # no broker to act on: refused before anything is produced
    (tmp_path / "run").mkdir()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        bootstrap = f"127.0.0.1:{listener.getsockname()[1]}"
        code = main(["--bootstrap-server", bootstrap, "--faults", "kill9",
                     "--cluster-dir", str(tmp_path)])
    assert code == COULD_NOT_RUN
    assert "could not run: no broker pid files" in capsys.readouterr().err


def test_list_faults_describes_every_kind(capsys):
    assert main(["--list-faults"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split(":")[0] for line in lines]
    assert names == sorted(names) and {"kill9", "leader-ahead", "pause"} <= set(names)
